import { LabIcon } from '@jupyterlab/ui-components';

// a loss curve falling across a grid: the side panel's tab and the launcher items
const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">
  <g class="jp-icon3" fill="#616161">
    <path d="M3 3h2v16h16v2H3z"/>
    <path d="M6.5 6.2l1.6-1.2 3.3 4.6 2.6-1.9 3.1 5.2 2.4-1.5 1 1.7-4.1 2.5-3-5-2.5 1.9z"/>
  </g>
</svg>`;

export const runsIcon = new LabIcon({ name: 'workbench-jupyterlab:runs', svgstr: svg });
