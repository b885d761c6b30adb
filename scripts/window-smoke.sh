#!/usr/bin/env bash
# Smoke test of the real desktop window (docs/DESIGN.md, "Testing"): start the Wails build
# under Xvfb with an empty config (the embedded default: the demo fleet
# when no local server answers), wait until the window exists and the API
# answers, take a screenshot of the chat screen, check it is not blank,
# then stop the app with SIGTERM and require a clean exit. Then: a display
# that refuses the app, and a config that does not load (a window says why).
set -euo pipefail
bin=${1:-build/bin/switchyard-desktop}
art=${ARTIFACTS:-test-artifacts}
mkdir -p "$art"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data"
export BIN="$bin" ART="$art" LOG="$tmp/app.log"

# screenshot FILE: the display, taken again (bounded) until the UI has
# rendered something, as the colours tell; prints how many it has.
screenshot() {
  local c=0
  for i in $(seq 1 40); do
    import -window root "$1"
    c=$(identify -format %k "$1")
    [ "$c" -gt 16 ] && break
    sleep 0.5
  done
  echo "$c"
}
# xvfb-run's sh drops exported functions: the inner scripts define it from this.
export SCREENSHOT="$(declare -f screenshot)"

xvfb-run -a -s "-screen 0 1280x820x24" bash -euo pipefail -c '
  eval "$SCREENSHOT"
  "$BIN" >"$LOG" 2>&1 &
  pid=$!
  fail() { echo "window smoke: $*"; echo "--- app log"; cat "$LOG"; kill -9 $pid 2>/dev/null || true; exit 1; }
  # Wait (bounded) for the window and for the API the UI talks to.
  for i in $(seq 1 120); do
    kill -0 $pid 2>/dev/null || fail "the app exited early"
    if xwininfo -root -tree 2>/dev/null | grep -q "Switchyard"; then
      url=$(grep -o "API on http://[0-9.:]*" "$LOG" | head -1 | cut -d" " -f3 || true)
      if [ -n "$url" ] && curl -fsS "$url/switchyard/v1/status" >/dev/null 2>&1; then break; fi
    fi
    sleep 0.5
  done
  [ -n "${url:-}" ] || fail "no window or no API within 60s"
  colours=$(screenshot "$ART/desktop-window.png")
  [ "$colours" -gt 16 ] || fail "the window stayed blank ($colours colours)"
  # It says at start what serve says: the config in force and where the history is kept.
  for i in $(seq 1 40); do grep -q "^switchyard: .* history: " "$LOG" && break; sleep 0.25; done
  grep -q "^switchyard: .* history: " "$LOG" || fail "the log does not say where the history is kept"
  title=$(xwininfo -root -tree | grep -o "\"Switchyard[^\"]*\"" | head -1)
  echo "window smoke: window $title, $colours colours, screenshot $ART/desktop-window.png"
  kill -TERM $pid
  code=0; wait $pid || code=$?
  [ $code -eq 0 ] || fail "exit code $code after SIGTERM"
  echo "window smoke: clean exit"
'

# A display that is there but refuses this program (an X server that
# wants a cookie the app does not have, as after ssh or sudo): one clear
# message and exit 1, not GTK's panic with a goroutine trace.
xauth -f "$tmp/xauth" add :0 . "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >/dev/null 2>&1
disp=$(( (RANDOM % 200) + 200 ))
Xvfb ":$disp" -nolisten tcp -auth "$tmp/xauth" >/dev/null 2>&1 &
xpid=$!
for i in $(seq 1 40); do [ -S "/tmp/.X11-unix/X$disp" ] && break; sleep 0.25; done
code=0
env -i PATH="$PATH" HOME="$tmp" XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data" DISPLAY=":$disp" \
  timeout 30 "$bin" >"$tmp/refused.log" 2>&1 || code=$?
kill $xpid 2>/dev/null || true
if [ $code -ne 1 ] || grep -q "panic" "$tmp/refused.log" || ! grep -q "refused to open a window" "$tmp/refused.log"; then
  echo "window smoke: a display that refuses the app gave exit $code:"; cat "$tmp/refused.log"; exit 1
fi
echo "window smoke: a display that refuses the app is said in one line (exit 1)"

# A config that does not load: the window says why (the app, started from
# a launcher, has nobody reading its stderr), and closing it ends the app
# with exit 1.
mkdir -p "$tmp/broken/switchyard"
printf 'chat:\n  candidates:\n    - {id: a, provider: ollama, url: "http://127.0.0.1:1", model: m, priorty: 1}\n' >"$tmp/broken/switchyard/config.yaml"
export BROKEN="$tmp/broken"
xvfb-run -a -s "-screen 0 1280x820x24" bash -euo pipefail -c '
  eval "$SCREENSHOT"
  XDG_CONFIG_HOME="$BROKEN" "$BIN" >"$LOG.broken" 2>&1 &
  pid=$!
  fail() { echo "window smoke: $*"; echo "--- app log"; cat "$LOG.broken"; kill -9 $pid 2>/dev/null || true; exit 1; }
  for i in $(seq 1 120); do
    kill -0 $pid 2>/dev/null || fail "the app exited without a window"
    xwininfo -root -tree 2>/dev/null | grep -q "Switchyard — could not start" && break
    sleep 0.5
  done
  xwininfo -root -tree | grep -q "Switchyard — could not start" || fail "no window saying it could not start within 60s"
  colours=$(screenshot "$ART/desktop-cannot-start.png")
  [ "$colours" -gt 16 ] || fail "the window stayed blank ($colours colours)"
  grep -q "priorty" "$LOG.broken" || fail "the log does not say why"
  kill -TERM $pid
  code=0; wait $pid || code=$?
  [ $code -eq 1 ] || fail "exit code $code after the window closed; want 1"
  echo "window smoke: a config that does not load is said in a window, screenshot $ART/desktop-cannot-start.png"
'
