/* A main-area view of one run's event log, following it live (the events stream route). */
import { Widget } from '@lumino/widgets';

import { openStream } from './api';

const SHOWN = ['step', 'loss', 'lr', 'grad_norm', 'loss_scale', 'skipped', 'tokens_per_s', 'scale_before',
  'scale_after', 'nonfinite_count', 'kind', 'path', 'final_loss', 'stopped', 'stop_reason', 'error_type', 'error',
  'total_steps', 'host_rss', 'params_bytes', 'grads_bytes', 'optimizer_bytes', 'low_precision_share', 'totals'];
const MAX_ROWS = 2000;

function value(key: string, v: any): string {
  if (typeof v === 'number') {
    // byte counts in MB; other numbers to 5 significant digits
    return key.endsWith('bytes') || key === 'host_rss' ? `${(v / 2 ** 20).toFixed(1)} MB` : String(Number(v.toPrecision(5)));
  }
  return (typeof v === 'object' ? JSON.stringify(v) : String(v)).slice(0, 120);
}

function summary(e: { [key: string]: any }): string {
  return SHOWN.filter(k => e[k] !== undefined && e[k] !== null && k !== 'step')
    .map(k => `${k}=${value(k, e[k])}`)
    .join('  ');
}

export class EventsView extends Widget {
  private _body: HTMLTableSectionElement;
  private _state: HTMLElement;
  private _source: EventSource | null = null;
  private _rows = 0;
  private _offset = 0;

  constructor(readonly run: string) {
    super();
    this.id = `workbench-events-${run}`;
    this.title.label = `events · ${run}`;
    this.title.closable = true;
    this.addClass('wb-EventsView');
    this._state = document.createElement('div');
    this._state.className = 'wb-EventsView-state';
    this._state.textContent = 'reading…';
    const table = document.createElement('table');
    table.className = 'wb-EventsView-table';
    table.createTHead().innerHTML = '<tr><th>time</th><th>rank</th><th>type</th><th>step</th><th>fields</th></tr>';
    this._body = table.createTBody();
    this.node.append(this._state, table);
    this._open();
  }

  private _open(): void {
    this._source = openStream(`runs/${encodeURIComponent(this.run)}/events/stream`, {
      events: (m: { events: { [key: string]: any }[]; offset: number }) => this._add(m.events, m.offset),
      end: (m: { status: string; offset: number }) => {
        this._state.textContent = `${this._rows} events · the run is ${m.status}`;
        this._source?.close();
      }
    }, { offset: String(this._offset) });
    this._source.onerror = () => {
      // reconnect from where the log was read to, not from EventSource's original URL (offset 0)
      this._source?.close();
      this._state.textContent = `${this._rows} events · connection lost (retrying)…`;
      if (!this.isDisposed) {
        setTimeout(() => this.isDisposed || this._open(), 2000);
      }
    };
  }

  private _add(events: { [key: string]: any }[], offset: number): void {
    this._offset = offset;
    for (const e of events) {
      const row = this._body.insertRow();
      row.className = `wb-event wb-event-${e.type}`;
      const t = new Date(1000 * e.time);
      for (const text of [t.toLocaleTimeString(), String(e.rank ?? 0), e.type, e.step ?? '', summary(e)]) {
        row.insertCell().textContent = String(text);
      }
      this._rows++;
    }
    while (this._body.rows.length > MAX_ROWS) {
      this._body.deleteRow(0);
    }
    this._state.textContent = `${this._rows} events (${offset} bytes) · following`;
    this.node.scrollTop = this.node.scrollHeight;
  }

  dispose(): void {
    this._source?.close();
    super.dispose();
  }
}
