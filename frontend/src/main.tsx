import './locale'; // first: makes navigator.language safe for Intl (LANG=C desktops)
import { render } from 'preact';
import { App } from './app';
import { applyTheme, loadTheme } from './theme';
import './styles.css';

applyTheme(loadTheme());
render(<App />, document.getElementById('app')!);
