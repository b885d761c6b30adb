import type { ComponentChildren } from 'preact';

export type BadgeTone = 'ok' | 'warn' | 'bad' | 'info' | 'muted' | 'accent';

interface Props {
  tone: BadgeTone;
  children: ComponentChildren;
  testid?: string;
  title?: string;
}

export function Badge({ tone, children, testid, title }: Props) {
  return (
    <span class={`badge badge-${tone}`} data-testid={testid} title={title}>
      {children}
    </span>
  );
}
