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

async function route(): Promise<void> {
  const [name = 'cluster', arg] = location.hash.slice(1).split('/');
  const view = VIEWS[name] ?? VIEWS.cluster!;
  const main = document.getElementById('view')!;
  const mine = ++drawing;
  for (const link of document.querySelectorAll('nav a'))
    link.toggleAttribute('aria-current', link.getAttribute('href') === `#${VIEWS[name] ? name : 'cluster'}`);
  main.setAttribute('aria-busy', 'true');
  try {
    const content = await view(arg);
    if (mine !== drawing) return; // another view was asked for meanwhile
    main.replaceChildren(content);
  } catch (error) {
    if (mine === drawing) main.replaceChildren(h('p', { class: 'bad', role: 'alert' }, (error as Error).message));
  } finally {
    if (mine === drawing) main.removeAttribute('aria-busy');
  }
}

addEventListener('hashchange', () => void route());
void route();
