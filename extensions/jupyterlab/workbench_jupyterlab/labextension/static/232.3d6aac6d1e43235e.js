"use strict";(self.rspackChunkworkbench_jupyterlab=self.rspackChunkworkbench_jupyterlab||[]).push([[232],{475(e,t,r){var o=r(601),a=r.n(o),n=r(314),i=(r.n(n))()(a());i.push([e.id,`/* Only JupyterLab's theme variables: the panel follows the light and dark themes (and any other). */
.wb-RunsPanel {
  display: flex;
  flex-direction: column;
  min-width: 260px;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  overflow-y: auto;
}

.wb-RunsPanel-header {
  padding: 8px 10px 6px;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
}

.wb-RunsPanel-title {
  margin: 0 0 2px;
  font-size: var(--jp-ui-font-size2);
  font-weight: 600;
  text-transform: uppercase;
  letter-spacing: 0.03em;
  color: var(--jp-ui-font-color1);
}

.wb-RunsPanel-info,
.wb-RunsPanel-dir {
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.wb-RunsPanel-dir {
  overflow: hidden;
  white-space: nowrap;
  text-overflow: ellipsis;
  direction: rtl;
  text-align: left;
  font-family: var(--jp-code-font-family);
}

.wb-RunsPanel-tools,
.wb-run-actions {
  display: flex;
  flex-wrap: wrap;
  gap: 4px;
  margin-top: 6px;
}

.wb-RunsPanel .wb-button {
  height: 22px;
  line-height: 20px;
  padding: 0 8px;
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size0);
  border-radius: var(--jp-border-radius);
  color: var(--jp-ui-font-color1);
  background: var(--jp-layout-color2);
  border: var(--jp-border-width) solid var(--jp-border-color1);
  cursor: pointer;
}

.wb-RunsPanel .wb-button:hover:not(:disabled) {
  background: var(--jp-layout-color3);
}

.wb-RunsPanel .wb-button:disabled {
  opacity: 0.5;
  cursor: default;
}

.wb-RunsPanel .wb-button.wb-stop {
  color: var(--jp-ui-inverse-font-color1);
  background: var(--jp-error-color1);
  border-color: var(--jp-error-color1);
}

.wb-RunsPanel .wb-button.wb-stop:hover:not(:disabled) {
  background: var(--jp-error-color0);
}

.wb-RunsPanel-empty {
  padding: 10px;
  color: var(--jp-ui-font-color2);
}

.wb-run {
  padding: 8px 10px;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
}

.wb-run-top {
  display: flex;
  align-items: center;
  gap: 6px;
}

.wb-run-pick {
  margin: 0;
}

.wb-run-name {
  flex: 1;
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
  font-weight: 600;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
}

.wb-run-status {
  padding: 0 6px;
  border-radius: 8px;
  font-size: var(--jp-ui-font-size0);
  line-height: 16px;
  color: var(--jp-ui-inverse-font-color1);
  background: var(--jp-layout-color4);
}

.wb-status-running {
  background: var(--jp-brand-color1);
}

.wb-status-finished {
  background: var(--jp-success-color1);
}

.wb-status-stopped {
  background: var(--jp-warn-color1);
}

.wb-status-failed {
  background: var(--jp-error-color1);
}

.wb-run-progress {
  height: 3px;
  margin: 6px 0 4px;
  background: var(--jp-layout-color3);
  border-radius: 2px;
  overflow: hidden;
}

.wb-run-progress-bar {
  height: 100%;
  background: var(--jp-brand-color1);
  transition: width 0.2s;
}

.wb-run-metrics {
  display: grid;
  grid-template-columns: repeat(4, auto);
  justify-content: space-between;
  gap: 2px 8px;
}

.wb-metric {
  display: flex;
  flex-direction: column;
}

.wb-metric-label {
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.wb-metric-value {
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
}

.wb-has-overflows .wb-metric-value {
  color: var(--jp-warn-color0);
  font-weight: 600;
}

.wb-sparkline {
  display: block;
  width: 100%;
  height: 28px;
  margin-top: 4px;
}

.wb-sparkline polyline {
  fill: none;
  stroke: var(--jp-brand-color1);
  stroke-width: 1.5;
  vector-effect: non-scaling-stroke;
}

.wb-run-error {
  margin-top: 4px;
  color: var(--jp-error-color1);
  font-size: var(--jp-ui-font-size0);
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
}

.wb-RunsStatus {
  display: flex;
  align-items: center;
  height: 100%;
  padding: 0 6px;
  cursor: pointer;
  white-space: nowrap;
  font-size: var(--jp-ui-font-size1);
  line-height: 24px;
}

.wb-RunsStatus:hover {
  background: var(--jp-layout-color2);
}

.wb-RunsStatus[data-running]:not([data-running='0']) {
  color: var(--jp-brand-color1);
}

.wb-EventsView {
  overflow: auto;
  padding: 8px 12px;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
}

.wb-EventsView-state {
  margin-bottom: 6px;
  color: var(--jp-ui-font-color2);
}

.wb-EventsView-table {
  border-collapse: collapse;
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
}

.wb-EventsView-table th {
  position: sticky;
  top: 0;
  text-align: left;
  background: var(--jp-layout-color2);
}

.wb-EventsView-table td,
.wb-EventsView-table th {
  padding: 1px 8px;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color3);
  white-space: nowrap;
}

.wb-EventsView-table td:last-child {
  white-space: normal;
}

.wb-event-overflow td,
.wb-event-run_failed td {
  color: var(--jp-error-color1);
}

.wb-event-run_finished td,
.wb-event-checkpoint td {
  color: var(--jp-success-color1);
}

/* Workbench's plotly charts (the notebook panels' FigureWidgets) on a dark JupyterLab theme. The kernel draws them
   with plotly_dark when the theme it reads from JupyterLab's settings is dark (workbench.ui.lab_settings); these
   rules also cover a chart drawn before the theme was switched: backgrounds take the theme's, text and grid lines
   its colours. JupyterLab marks the theme on <body>. Plotly writes its colours as inline styles: !important.
   Only the first of plotly's stacked <svg class="main-svg"> layers (the one holding the traces) gets a background:
   the layers above it (titles, annotations, hover) must stay transparent, or they cover the traces and the chart
   shows blank (the dark monitor's charts did). */
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot .main-svg:first-child {
  background: var(--jp-layout-color0) !important;
}
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot rect.bg {
  fill: var(--jp-layout-color1) !important;
}
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot text {
  fill: var(--jp-ui-font-color1) !important;
}
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot .gridlayer path,
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot .zerolinelayer path {
  stroke: var(--jp-border-color2) !important;
}
`,""]),r.d(t,{},{A:i})},314(e){e.exports=function(e){var t=[];return t.toString=function(){return this.map(function(t){var r="",o=void 0!==t[5];return t[4]&&(r+="@supports (".concat(t[4],") {")),t[2]&&(r+="@media ".concat(t[2]," {")),o&&(r+="@layer".concat(t[5].length>0?" ".concat(t[5]):""," {")),r+=e(t),o&&(r+="}"),t[2]&&(r+="}"),t[4]&&(r+="}"),r}).join("")},t.i=function(e,r,o,a,n){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(o)for(var l=0;l<this.length;l++){var s=this[l][0];null!=s&&(i[s]=!0)}for(var p=0;p<e.length;p++){var c=[].concat(e[p]);o&&i[c[0]]||(void 0!==n&&(void 0===c[5]||(c[1]="@layer".concat(c[5].length>0?" ".concat(c[5]):""," {").concat(c[1],"}")),c[5]=n),r&&(c[2]&&(c[1]="@media ".concat(c[2]," {").concat(c[1],"}")),c[2]=r),a&&(c[4]?(c[1]="@supports (".concat(c[4],") {").concat(c[1],"}"),c[4]=a):c[4]="".concat(a)),t.push(c))}},t}},601(e){e.exports=function(e){return e[1]}},72(e){var t=[];function r(e){for(var r=-1,o=0;o<t.length;o++)if(t[o].identifier===e){r=o;break}return r}function o(e,o){for(var a={},n=[],i=0;i<e.length;i++){var l=e[i],s=o.base?l[0]+o.base:l[0],p=a[s]||0,c="".concat(s," ").concat(p);a[s]=p+1;var u=r(c),d={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==u)t[u].references++,t[u].updater(d);else{var f=function(e,t){var r=t.domAPI(t);return r.update(e),function(t){t?(t.css!==e.css||t.media!==e.media||t.sourceMap!==e.sourceMap||t.supports!==e.supports||t.layer!==e.layer)&&r.update(e=t):r.remove()}}(d,o);o.byIndex=i,t.splice(i,0,{identifier:c,updater:f,references:1})}n.push(c)}return n}e.exports=function(e,a){var n=o(e=e||[],a=a||{});return function(e){e=e||[];for(var i=0;i<n.length;i++){var l=r(n[i]);t[l].references--}for(var s=o(e,a),p=0;p<n.length;p++){var c=r(n[p]);0===t[c].references&&(t[c].updater(),t.splice(c,1))}n=s}}},659(e){var t={};e.exports=function(e,r){var o=function(e){if(void 0===t[e]){var r=document.querySelector(e);if(window.HTMLIFrameElement&&r instanceof window.HTMLIFrameElement)try{r=r.contentDocument.head}catch(e){r=null}t[e]=r}return t[e]}(e);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(r)}},540(e){e.exports=function(e){var t=document.createElement("style");return e.setAttributes(t,e.attributes),e.insert(t,e.options),t}},56(e,t,r){e.exports=function(e){var t=r.nc;t&&e.setAttribute("nonce",t)}},825(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var t=e.insertStyleElement(e);return{update:function(r){var o,a,n;o="",r.supports&&(o+="@supports (".concat(r.supports,") {")),r.media&&(o+="@media ".concat(r.media," {")),(a=void 0!==r.layer)&&(o+="@layer".concat(r.layer.length>0?" ".concat(r.layer):""," {")),o+=r.css,a&&(o+="}"),r.media&&(o+="}"),r.supports&&(o+="}"),(n=r.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(o,t,e.options)},remove:function(){var e;null===(e=t).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,t){if(t.styleSheet)t.styleSheet.cssText=e;else{for(;t.firstChild;)t.removeChild(t.firstChild);t.appendChild(document.createTextNode(e))}}},579(e,t,r){var o=r(72),a=r.n(o),n=r(825),i=r.n(n),l=r(659),s=r.n(l),p=r(56),c=r.n(p),u=r(540),d=r.n(u),f=r(113),b=r.n(f),v=r(475),h={};h.styleTagTransform=b(),h.setAttributes=c(),h.insert=s().bind(null,"head"),h.domAPI=i(),h.insertStyleElement=d(),a()(v.A,h),v.A&&v.A.locals&&v.A.locals}}]);