import { useState } from 'preact/hooks';
import { copyText } from '../desktop';

interface Props {
  text: string;
  label?: string;
  testid?: string;
}

/** CopyButton copies text through the desktop shell when bound, else the browser clipboard. */
export function CopyButton({ text, label = 'Copy', testid }: Props) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const onClick = () => {
    copyText(text).then(
      () => setState('copied'),
      () => setState('failed'),
    );
    setTimeout(() => setState('idle'), 1500);
  };
  return (
    <button type="button" class="btn btn-ghost btn-small" onClick={onClick} data-testid={testid} disabled={!text}>
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed' : label}
    </button>
  );
}
