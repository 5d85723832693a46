/* The runs as the server streams them: one model shared by the side panel and the status-bar item. */
import { ISignal, Signal } from '@lumino/signaling';

import { IRunRow, IRunsMessage, openStream } from './api';

export class RunsModel {
  private _runs: IRunRow[] = [];
  private _runsDir = '';
  private _connected = false;
  private _source: EventSource | null = null;
  private _changed = new Signal<this, void>(this);

  get runs(): IRunRow[] {
    return this._runs;
  }

  get runsDir(): string {
    return this._runsDir;
  }

  get connected(): boolean {
    return this._connected;
  }

  get running(): IRunRow[] {
    return this._runs.filter(r => r.status === 'running');
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  start(): void {
    if (this._source) {
      return;
    }
    this._source = openStream('runs/stream', {
      runs: (message: IRunsMessage) => {
        this._runs = message.runs;
        this._runsDir = message.runs_dir;
        this._connected = true;
        this._changed.emit();
      }
    });
    this._source.onerror = () => {
      // EventSource retries by itself; say so in the panel meanwhile
      if (this._connected) {
        this._connected = false;
        this._changed.emit();
      }
    };
  }

  dispose(): void {
    this._source?.close();
    this._source = null;
  }
}
