import { useState } from 'preact/hooks';

interface Props {
  onSubmit(token: string): void;
  hadToken: boolean;
}

/** TokenForm asks for the API key when the server answers 401. */
export function TokenForm({ onSubmit, hadToken }: Props) {
  const [token, setToken] = useState('');
  return (
    <div class="overlay" role="dialog" aria-modal="true" aria-labelledby="token-title">
      <form
        class="card token-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (token.trim()) onSubmit(token);
        }}
      >
        <h2 id="token-title">This Switchyard needs an API key</h2>
        <p class="muted">
          {hadToken
            ? 'The key this tab had was refused. Enter the current one.'
            : 'The server has an api_key set. Enter it to continue; it is kept for this browser tab only.'}
        </p>
        <label class="field">
          <span>API key</span>
          <input
            type="password"
            autoFocus
            autoComplete="off"
            value={token}
            onInput={(e) => setToken((e.target as HTMLInputElement).value)}
            data-testid="token-input"
          />
        </label>
        <button type="submit" class="btn btn-primary" disabled={!token.trim()} data-testid="token-submit">
          Connect
        </button>
      </form>
    </div>
  );
}
