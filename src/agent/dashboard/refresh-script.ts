/**
 * The page's one script, served as its own resource (`GET /dashboard.js`, from the agent's origin)
 * so the Content-Security-Policy allows scripts from 'self' only, never inline ones. It refreshes
 * the page in place: every `data-every` milliseconds (an attribute of its script element) it
 * fetches `fragment` (relative, so the page also works behind a path prefix, e.g. a proxy) and
 * swaps `<main>`'s content for it. While the agent does not answer, the last content stays
 * (dimmed) and the header says "agent not answering since HH:MM:SS UTC"; the first answer puts
 * things back. It pauses while the tab is hidden and refreshes at once when it is shown again.
 * One fetch at a time, each given up after one interval, so a hung agent never piles requests up.
 */
import { type Html, html } from './html.ts';

/** Where the page finds the script, relative to the page. */
export const REFRESH_SCRIPT_PATH = 'dashboard.js';

/** The script's text, the same for every page: what `GET /dashboard.js` answers. */
export const REFRESH_SCRIPT = `(() => {
  'use strict';
  // The interval is the script element's data-every (milliseconds), set by the page.
  const every = Number((document.currentScript || document.querySelector('script[data-every]')).dataset.every);
  const main = document.getElementById('dashboard');
  const state = document.getElementById('refresh-state');
  const idleText = state.textContent;
  let failingSince = null;
  let busy = false;
  let timer = null;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const answer = await fetch('fragment', { cache: 'no-store', signal: AbortSignal.timeout(every) });
      if (!answer.ok) throw new Error('HTTP ' + answer.status);
      main.innerHTML = await answer.text();
      main.classList.remove('stale');
      state.className = 'refresh';
      state.textContent = idleText;
      failingSince = null;
    } catch {
      if (failingSince === null) failingSince = new Date();
      main.classList.add('stale');
      state.className = 'refresh failing';
      state.textContent = 'agent not answering since ' + failingSince.toISOString().slice(11, 19) + ' UTC';
    } finally {
      busy = false;
    }
  }
  function schedule() {
    if (timer !== null) clearInterval(timer);
    timer = document.hidden ? null : setInterval(refresh, every);
  }
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refresh();
    schedule();
  });
  schedule();
})();
`;

/** The element that loads the script, telling it the interval. */
export function refreshScriptTag(intervalMs: number): Html {
  return html`<script src="${REFRESH_SCRIPT_PATH}" data-every="${intervalMs}"></script>`;
}
