/** The console's page: one view at a time, chosen by the URL's hash, drawn from the console's API. */
import { h } from './dom.js';
import { clusterView } from './cluster-view.js';
import { poolsView } from './pools-view.js';
import { queriesView } from './queries-view.js';
import { sqlView } from './sql-view.js';
import { tablesView } from './tables-view.js';

const VIEWS: Record<string, (arg?: string) => HTMLElement | Promise<HTMLElement>> = {
  cluster: clusterView,
  tables: tablesView,
  queries: (id) => queriesView(id === undefined ? undefined : Number(id)),
  pools: poolsView,
  sql: sqlView,
};

let drawing = 0;
let refresh: ReturnType<typeof setTimeout> | undefined;

/** Draws the view the hash names; `focus` moves the keyboard there (after a link, not on load). */
async function route(focus = false, redraw = false): Promise<void> {
  clearTimeout(refresh);
  const main = document.getElementById('view')!;
  // Someone typing in the view's form is not interrupted: the redraw waits for the next turn.
  if (redraw && main.contains(document.activeElement) && document.activeElement?.matches('input, select, textarea')) {
    refresh = setTimeout(() => void route(false, true), 1_000);
    return;
  }
  const [name = 'cluster', arg] = location.hash.slice(1).split('/');
  const view = VIEWS[name] ?? VIEWS.cluster!;
  const mine = ++drawing;
  for (const link of document.querySelectorAll('nav a'))
    link.toggleAttribute('aria-current', link.getAttribute('href') === `#${VIEWS[name] ? name : 'cluster'}`);
  main.setAttribute('aria-busy', 'true');
  try {
    const content = await view(arg);
    if (mine !== drawing) return; // another view was asked for meanwhile
    const focused = document.activeElement;
    main.replaceChildren(content);
    if (focus) main.focus();
    // A redraw keeps the keyboard where it was (a pager's button, a form's field), by its id.
    else if (focused?.id && main !== focused) document.getElementById(focused.id)?.focus();
    // A view that changes by itself (the pools' layers, the nodes' warm-up) asks to be drawn again.
    const every = Number(content.dataset.refreshMs);
    if (every > 0) refresh = setTimeout(() => void route(false, true), every);
  } catch (error) {
    if (mine === drawing) main.replaceChildren(h('p', { class: 'bad', role: 'alert' }, (error as Error).message));
  } finally {
    if (mine === drawing) main.removeAttribute('aria-busy');
  }
}

addEventListener('hashchange', () => void route(true));
void route();
