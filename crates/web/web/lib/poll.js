// Asking the server again at an interval while the page is visible (as
// TensorBoard's auto-reload does), and on demand (its reload button).

/**
 * Runs `refresh()` every `intervalMs` while the page is visible, at once when it
 * becomes visible after a missed turn, and when `now()` is called. One run at a
 * time: a call while one is under way waits for that one. Returns `{now}`.
 */
export function pollWhileVisible(refresh, intervalMs) {
  let last = Date.now();
  let running = null;
  const now = () => {
    if (!running) {
      last = Date.now();
      running = Promise.resolve().then(refresh).finally(() => { running = null; });
    }
    return running;
  };
  const due = () => !document.hidden && Date.now() - last >= intervalMs;
  setInterval(() => { if (due()) now(); }, Math.min(intervalMs, 1000));
  document.addEventListener('visibilitychange', () => { if (due()) now(); });
  return { now };
}
