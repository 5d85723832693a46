/* The "Workbench runs" left side panel: every run of the runs directory, live, with its actions. */
import { Widget } from '@lumino/widgets';

import { IRunRow } from './api';
import { fmtLoss, fmtScale, fmtSteps, sparkline } from './format';
import { RunsModel } from './model';

export interface IRunActions {
  stop(name: string): void;
  openEvents(name: string): void;
  openMonitor(name: string): void;
  compare(names: string[]): void;
  newNotebook(): void;
  openDashboard(): void;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = cls;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, cls: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', `wb-button ${cls}`, label);
  b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

/** One run's card; updated in place (a button under the pointer is never replaced by a redraw). */
class RunCard {
  readonly node = el('div', 'wb-run');
  private _pick = el('input', 'wb-run-pick');
  private _name = el('span', 'wb-run-name');
  private _status = el('span', 'wb-run-status');
  private _bar = el('div', 'wb-run-progress-bar');
  private _metrics = el('div', 'wb-run-metrics');
  private _spark = el('div', 'wb-run-sparkline');
  private _error = el('div', 'wb-run-error');
  private _actions = el('div', 'wb-run-actions');
  private _stop: HTMLButtonElement;
  private _last = '';

  constructor(readonly name: string, panel: RunsPanel, actions: IRunActions) {
    this.node.dataset.run = name;
    const top = el('div', 'wb-run-top');
    this._pick.type = 'checkbox';
    this._pick.title = 'select for Compare (two runs)';
    this._pick.addEventListener('change', () => panel.select(name, this._pick.checked));
    this._name.textContent = name;
    top.append(this._pick, this._name, this._status);
    const progress = el('div', 'wb-run-progress');
    progress.appendChild(this._bar);
    this._stop = button('Stop', 'wb-stop', 'Stop after the current step (a checkpoint is saved)', () =>
      actions.stop(name));
    this._actions.append(
      this._stop,
      button('Events', 'wb-events', "The run's event log, live", () => actions.openEvents(name)),
      button('Monitor', 'wb-monitor', 'A notebook with the live monitor attached to this run', () =>
        actions.openMonitor(name))
    );
    this.node.append(top, progress, this._metrics, this._spark, this._error, this._actions);
  }

  update(run: IRunRow, selected: boolean, sparklinePoints: number): void {
    this._pick.checked = selected;
    const key = JSON.stringify([run, sparklinePoints]);
    if (key === this._last) {
      return;
    }
    this._last = key;
    this.node.className = `wb-run wb-run-${run.status}`;
    this.node.dataset.step = String(run.step);
    this.node.dataset.status = run.status;
    this._name.title = [run.name, run.model, run.precision].filter(Boolean).join(' · '); // the name may be cut short
    this._status.className = `wb-run-status wb-status-${run.status}`;
    this._status.textContent = run.status;
    this._bar.style.width = `${run.total_steps ? Math.min(100, (100 * run.step) / run.total_steps) : 0}%`;
    const metric = (label: string, value: string, cls: string, title: string) => {
      const m = el('span', `wb-metric ${cls}`);
      m.title = title;
      m.append(el('span', 'wb-metric-label', label), el('span', 'wb-metric-value', value));
      return m;
    };
    this._metrics.replaceChildren(
      metric('step', fmtSteps(run.step, run.total_steps), 'wb-step', 'last logged step / total steps'),
      metric('loss', fmtLoss(run.loss), 'wb-loss', "the last step's token loss"),
      metric('scale', fmtScale(run.loss_scale), 'wb-scale', 'the loss scale (fp16 GradScaler); none without loss scaling'),
      metric('overflows', String(run.overflows), `wb-overflows${run.overflows ? ' wb-has-overflows' : ''}`,
        `${run.overflows} gradient overflow(s), ${run.skipped_steps} skipped step(s)`)
    );
    this._spark.replaceChildren(sparkline(run.loss_series, sparklinePoints));
    this._error.textContent = run.error ? run.error.split('\n')[0] : '';
    this._error.title = run.error ?? '';
    this._error.style.display = run.error ? '' : 'none';
    this._stop.style.display = run.status === 'running' ? '' : 'none';
  }

  stopping(on: boolean): void {
    this._stop.disabled = on;
    this._stop.textContent = on ? 'Stopping…' : 'Stop';
  }
}

export class RunsPanel extends Widget {
  private _selected = new Set<string>();
  private _cards = new Map<string, RunCard>();
  private _list: HTMLElement;
  private _info: HTMLElement;
  private _dir: HTMLElement;
  private _empty: HTMLElement;
  private _compare: HTMLButtonElement;
  sparklinePoints = 60;

  constructor(private _model: RunsModel, private _actions: IRunActions) {
    super();
    this.id = 'workbench-runs';
    this.addClass('wb-RunsPanel');
    const head = el('div', 'wb-RunsPanel-header');
    head.appendChild(el('h2', 'wb-RunsPanel-title', 'Workbench runs'));
    this._info = el('div', 'wb-RunsPanel-info', 'connecting…');
    this._dir = el('div', 'wb-RunsPanel-dir');
    head.append(this._info, this._dir);
    const tools = el('div', 'wb-RunsPanel-tools');
    this._compare = button('Compare', 'wb-compare', 'Tick two runs, then compare their loss curves and configs', () =>
      this._actions.compare([...this._selected]));
    tools.append(
      button('New fine-tune', 'wb-new', 'A new fine-tune notebook from the template', () => this._actions.newNotebook()),
      button('Dashboard', 'wb-dashboard', 'Open the Workbench dashboard notebook', () => this._actions.openDashboard()),
      this._compare
    );
    head.appendChild(tools);
    this.node.appendChild(head);
    this._list = el('div', 'wb-RunsPanel-list');
    this._empty = el('p', 'wb-RunsPanel-empty',
      'No runs yet. Start one from a notebook (New fine-tune) or with `workbench train`.');
    this.node.append(this._list, this._empty);
    this._model.changed.connect(this.render, this);
    this.render();
  }

  dispose(): void {
    this._model.changed.disconnect(this.render, this);
    super.dispose();
  }

  select(name: string, on: boolean): void {
    on ? this._selected.add(name) : this._selected.delete(name);
    this.render();
  }

  /** Mark a run's Stop as pending (the stream then shows it stopped), or no longer pending (the request failed). */
  stopping(name: string, on = true): void {
    this._cards.get(name)?.stopping(on);
  }

  render(): void {
    const runs = this._model.runs;
    const names = new Set(runs.map(r => r.name));
    this._selected.forEach(n => names.has(n) || this._selected.delete(n));
    const running = this._model.running.length;
    this._info.textContent = !this._model.connected
      ? 'not connected to the server (retrying)…'
      : `${runs.length} run${runs.length === 1 ? '' : 's'}${running ? `, ${running} running` : ''} in`;
    // the end of the path is what tells runs directories apart: the start is elided (CSS) and in the tooltip
    this._dir.textContent = `\u200e${this._model.runsDir}\u200e`; // left-to-right marks: '/' stays in place under rtl
    this._dir.title = this._model.runsDir;
    this._compare.disabled = this._selected.size !== 2;
    this._compare.textContent = `Compare (${this._selected.size}/2)`;
    for (const [name, card] of this._cards) {
      if (!names.has(name)) {
        card.node.remove();
        this._cards.delete(name);
      }
    }
    // newest first (names are start times by default): the run just launched is at the top
    const ordered = [...runs].reverse();
    ordered.forEach((run, i) => {
      let card = this._cards.get(run.name);
      if (!card) {
        card = new RunCard(run.name, this, this._actions);
        this._cards.set(run.name, card);
      }
      card.update(run, this._selected.has(run.name), this.sparklinePoints);
      if (this._list.children[i] !== card.node) {
        this._list.insertBefore(card.node, this._list.children[i] ?? null);
      }
    });
    this._empty.style.display = !runs.length && this._model.connected ? '' : 'none';
  }
}
