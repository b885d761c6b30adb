import './locale'; // first: makes navigator.language safe for Intl (LANG=C desktops)
import { render } from 'preact';
import { App } from './app';
import { applyTheme, followSystemTheme, loadTheme } from './theme';
import './styles.css';

applyTheme(loadTheme());
followSystemTheme();
render(<App />, document.getElementById('app')!);
