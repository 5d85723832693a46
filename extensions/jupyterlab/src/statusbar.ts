/* The status-bar item: the running runs' step, loss and overflow count; a click opens the side panel. */
import { Widget } from '@lumino/widgets';

import { fmtLoss, fmtSteps } from './format';
import { RunsModel } from './model';

export class RunsStatus extends Widget {
  constructor(private _model: RunsModel, onClick: () => void) {
    super();
    this.addClass('wb-RunsStatus');
    this.node.title = 'Workbench runs: click to open the side panel';
    this.node.addEventListener('click', onClick);
    this._model.changed.connect(this.render, this);
    this.render();
  }

  dispose(): void {
    this._model.changed.disconnect(this.render, this);
    super.dispose();
  }

  render(): void {
    const running = this._model.running;
    if (!running.length) {
      this.node.textContent = 'Workbench: no run going';
      this.node.dataset.running = '0';
      return;
    }
    const r = running[running.length - 1];
    const more = running.length > 1 ? ` (+${running.length - 1} running)` : '';
    this.node.textContent =
      `Workbench ${r.name}: step ${fmtSteps(r.step, r.total_steps)} · loss ${fmtLoss(r.loss)} · ` +
      `${r.overflows} overflow${r.overflows === 1 ? '' : 's'}${more}`;
    this.node.dataset.running = String(running.length);
  }
}
