/* Workbench in JupyterLab: the "Workbench runs" side panel, a status-bar item, and the commands (launcher and
 * palette) that open a fine-tune notebook from the template or the dashboard. Everything is read from the
 * server extension's routes, which read the runs' own event logs. */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Dialog, ICommandPalette, MainAreaWidget, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Signal } from '@lumino/signaling';

import { requestAPI } from './api';
import { EventsView } from './events';
import { runsIcon } from './icon';
import { RunsModel } from './model';
import { RunsPanel } from './panel';
import { RunsStatus } from './statusbar';

const PLUGIN_ID = 'workbench-jupyterlab:plugin';

namespace CommandIDs {
  export const showRuns = 'workbench:show-runs';
  export const newNotebook = 'workbench:new-finetune-notebook';
  export const dashboard = 'workbench:open-dashboard';
  export const stop = 'workbench:stop-run';
  export const events = 'workbench:open-events';
  export const monitor = 'workbench:open-monitor';
  export const compare = 'workbench:compare-runs';
}

interface ISettings {
  showStatusBar: boolean;
  sparklinePoints: number;
  confirmStop: boolean;
  runOpenedNotebooks: boolean;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Workbench runs: side panel, status bar, notebook commands',
  autoStart: true,
  optional: [ICommandPalette, ILauncher, IStatusBar, ISettingRegistry, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null
  ) => {
    const settings: ISettings = { showStatusBar: true, sparklinePoints: 60, confirmStop: true, runOpenedNotebooks: true };
    const statusChanged = new Signal<object, void>({});
    const model = new RunsModel();
    const fail = (what: string) => (err: Error) => showErrorMessage(`Workbench: ${what}`, err.message);

    /** Ask the server for a notebook of ``kind`` and open it (running its cells for the live panels). */
    const openNotebook = async (kind: string, runs: string[], runCells: boolean): Promise<void> => {
      const { path } = await requestAPI<{ path: string }>('notebooks', {
        method: 'POST',
        body: JSON.stringify({ kind, runs })
      });
      const widget: any = await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
      if (runCells && settings.runOpenedNotebooks && widget?.sessionContext) {
        await widget.context.ready;
        await widget.sessionContext.ready;
        app.shell.activateById(widget.id);
        await app.commands.execute('notebook:run-all-cells');
      }
    };

    const panel = new RunsPanel(model, {
      stop: name => app.commands.execute(CommandIDs.stop, { name }),
      openEvents: name => app.commands.execute(CommandIDs.events, { name }),
      openMonitor: name => app.commands.execute(CommandIDs.monitor, { name }),
      compare: runs => app.commands.execute(CommandIDs.compare, { runs }),
      newNotebook: () => app.commands.execute(CommandIDs.newNotebook),
      openDashboard: () => app.commands.execute(CommandIDs.dashboard)
    });
    panel.title.icon = runsIcon;
    panel.title.caption = 'Workbench runs';
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'workbench-runs');
    model.start();

    app.commands.addCommand(CommandIDs.showRuns, {
      label: 'Show Workbench runs',
      icon: runsIcon,
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.newNotebook, {
      label: 'New fine-tune notebook',
      caption: 'A notebook with a fine-tune configuration and the Workbench dashboard (from the template)',
      icon: runsIcon,
      execute: () => openNotebook('finetune', [], false).catch(fail('New fine-tune notebook'))
    });
    app.commands.addCommand(CommandIDs.dashboard, {
      label: 'Open Workbench dashboard',
      caption: 'Config, plan, launch & monitor, runs and chat panels in a notebook',
      icon: runsIcon,
      execute: () => openNotebook('dashboard', [], true).catch(fail('dashboard'))
    });
    app.commands.addCommand(CommandIDs.stop, {
      label: args => `Stop run ${args.name ?? ''}`,
      execute: async args => {
        const name = String(args.name);
        if (settings.confirmStop) {
          const answer = await showDialog({
            title: `Stop ${name}?`,
            body: 'The run stops after its current step and saves a checkpoint (continue it with ' +
              'checkpointing.resume_from=latest).',
            buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
          });
          if (!answer.button.accept) {
            return;
          }
        }
        panel.stopping(name);
        await requestAPI(`runs/${encodeURIComponent(name)}/stop`, { method: 'POST', body: '{}' }).catch(err => {
          panel.stopping(name, false);
          return fail('stop')(err);
        });
      }
    });
    app.commands.addCommand(CommandIDs.events, {
      label: args => `Events of ${args.name ?? 'a run'}`,
      execute: args => {
        const name = String(args.name);
        const id = `workbench-events-${name}`;
        const open = Array.from(app.shell.widgets('main')).find(w => w.id === id);
        if (open) {
          app.shell.activateById(id);
          return;
        }
        const view = new MainAreaWidget({ content: new EventsView(name) });
        view.id = id;
        view.title.label = `events · ${name}`;
        view.title.icon = runsIcon;
        app.shell.add(view, 'main');
      }
    });
    app.commands.addCommand(CommandIDs.monitor, {
      label: args => `Monitor ${args.name ?? 'a run'} in a notebook`,
      execute: args => openNotebook('monitor', [String(args.name)], true).catch(fail('monitor'))
    });
    app.commands.addCommand(CommandIDs.compare, {
      label: 'Compare two Workbench runs',
      execute: args => openNotebook('compare', (args.runs as string[]) ?? [], true).catch(fail('compare'))
    });

    for (const command of [CommandIDs.newNotebook, CommandIDs.dashboard, CommandIDs.showRuns]) {
      palette?.addItem({ command, category: 'Workbench' });
    }
    launcher?.add({ command: CommandIDs.newNotebook, category: 'Workbench', rank: 1 });
    launcher?.add({ command: CommandIDs.dashboard, category: 'Workbench', rank: 2 });

    if (statusBar) {
      const item = new RunsStatus(model, () => app.shell.activateById(panel.id));
      statusBar.registerStatusItem('workbench-jupyterlab:status', {
        item,
        align: 'left',
        rank: 4,
        isActive: () => settings.showStatusBar,
        activeStateChanged: statusChanged
      });
    }

    if (settingRegistry) {
      const apply = (s: ISettingRegistry.ISettings) => {
        Object.assign(settings, s.composite as unknown as ISettings);
        panel.sparklinePoints = settings.sparklinePoints;
        panel.render();
        statusChanged.emit();
      };
      settingRegistry
        .load(PLUGIN_ID)
        .then(s => {
          apply(s);
          s.changed.connect(apply);
        })
        .catch(err => console.error('workbench-jupyterlab: could not load its settings', err));
    }
  }
};

export default plugin;
