"use strict";(self.rspackChunkworkbench_jupyterlab=self.rspackChunkworkbench_jupyterlab||[]).push([[232],{475(e,r,o){var t=o(601),a=o.n(t),n=o(314),i=(o.n(n))()(a());i.push([e.id,`/* Only JupyterLab's theme variables: the panel follows the light and dark themes (and any other). */
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
   its colours. JupyterLab marks the theme on <body>. Plotly writes its colours as inline styles: !important. */
body[data-jp-theme-light='false'] .jp-OutputArea .js-plotly-plot .main-svg {
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
`,""]),o.d(r,{},{A:i})},314(e){e.exports=function(e){var r=[];return r.toString=function(){return this.map(function(r){var o="",t=void 0!==r[5];return r[4]&&(o+="@supports (".concat(r[4],") {")),r[2]&&(o+="@media ".concat(r[2]," {")),t&&(o+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),o+=e(r),t&&(o+="}"),r[2]&&(o+="}"),r[4]&&(o+="}"),o}).join("")},r.i=function(e,o,t,a,n){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(t)for(var l=0;l<this.length;l++){var s=this[l][0];null!=s&&(i[s]=!0)}for(var p=0;p<e.length;p++){var c=[].concat(e[p]);t&&i[c[0]]||(void 0!==n&&(void 0===c[5]||(c[1]="@layer".concat(c[5].length>0?" ".concat(c[5]):""," {").concat(c[1],"}")),c[5]=n),o&&(c[2]&&(c[1]="@media ".concat(c[2]," {").concat(c[1],"}")),c[2]=o),a&&(c[4]?(c[1]="@supports (".concat(c[4],") {").concat(c[1],"}"),c[4]=a):c[4]="".concat(a)),r.push(c))}},r}},601(e){e.exports=function(e){return e[1]}},72(e){var r=[];function o(e){for(var o=-1,t=0;t<r.length;t++)if(r[t].identifier===e){o=t;break}return o}function t(e,t){for(var a={},n=[],i=0;i<e.length;i++){var l=e[i],s=t.base?l[0]+t.base:l[0],p=a[s]||0,c="".concat(s," ").concat(p);a[s]=p+1;var u=o(c),d={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==u)r[u].references++,r[u].updater(d);else{var f=function(e,r){var o=r.domAPI(r);return o.update(e),function(r){r?(r.css!==e.css||r.media!==e.media||r.sourceMap!==e.sourceMap||r.supports!==e.supports||r.layer!==e.layer)&&o.update(e=r):o.remove()}}(d,t);t.byIndex=i,r.splice(i,0,{identifier:c,updater:f,references:1})}n.push(c)}return n}e.exports=function(e,a){var n=t(e=e||[],a=a||{});return function(e){e=e||[];for(var i=0;i<n.length;i++){var l=o(n[i]);r[l].references--}for(var s=t(e,a),p=0;p<n.length;p++){var c=o(n[p]);0===r[c].references&&(r[c].updater(),r.splice(c,1))}n=s}}},659(e){var r={};e.exports=function(e,o){var t=function(e){if(void 0===r[e]){var o=document.querySelector(e);if(window.HTMLIFrameElement&&o instanceof window.HTMLIFrameElement)try{o=o.contentDocument.head}catch(e){o=null}r[e]=o}return r[e]}(e);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(o)}},540(e){e.exports=function(e){var r=document.createElement("style");return e.setAttributes(r,e.attributes),e.insert(r,e.options),r}},56(e,r,o){e.exports=function(e){var r=o.nc;r&&e.setAttribute("nonce",r)}},825(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=e.insertStyleElement(e);return{update:function(o){var t,a,n;t="",o.supports&&(t+="@supports (".concat(o.supports,") {")),o.media&&(t+="@media ".concat(o.media," {")),(a=void 0!==o.layer)&&(t+="@layer".concat(o.layer.length>0?" ".concat(o.layer):""," {")),t+=o.css,a&&(t+="}"),o.media&&(t+="}"),o.supports&&(t+="}"),(n=o.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(t,r,e.options)},remove:function(){var e;null===(e=r).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,r){if(r.styleSheet)r.styleSheet.cssText=e;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(e))}}},579(e,r,o){var t=o(72),a=o.n(t),n=o(825),i=o.n(n),l=o(659),s=o.n(l),p=o(56),c=o.n(p),u=o(540),d=o.n(u),f=o(113),b=o.n(f),v=o(475),h={};h.styleTagTransform=b(),h.setAttributes=c(),h.insert=s().bind(null,"head"),h.domAPI=i(),h.insertStyleElement=d(),a()(v.A,h),v.A&&v.A.locals&&v.A.locals}}]);