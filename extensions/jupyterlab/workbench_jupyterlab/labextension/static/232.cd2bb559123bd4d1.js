"use strict";(self.rspackChunkworkbench_jupyterlab=self.rspackChunkworkbench_jupyterlab||[]).push([[232],{475(r,o,e){var t=e(601),n=e.n(t),a=e(314),i=(e.n(a))()(n());i.push([r.id,`/* Only JupyterLab's theme variables: the panel follows the light and dark themes (and any other). */
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
`,""]),e.d(o,{},{A:i})},314(r){r.exports=function(r){var o=[];return o.toString=function(){return this.map(function(o){var e="",t=void 0!==o[5];return o[4]&&(e+="@supports (".concat(o[4],") {")),o[2]&&(e+="@media ".concat(o[2]," {")),t&&(e+="@layer".concat(o[5].length>0?" ".concat(o[5]):""," {")),e+=r(o),t&&(e+="}"),o[2]&&(e+="}"),o[4]&&(e+="}"),e}).join("")},o.i=function(r,e,t,n,a){"string"==typeof r&&(r=[[null,r,void 0]]);var i={};if(t)for(var l=0;l<this.length;l++){var s=this[l][0];null!=s&&(i[s]=!0)}for(var p=0;p<r.length;p++){var c=[].concat(r[p]);t&&i[c[0]]||(void 0!==a&&(void 0===c[5]||(c[1]="@layer".concat(c[5].length>0?" ".concat(c[5]):""," {").concat(c[1],"}")),c[5]=a),e&&(c[2]&&(c[1]="@media ".concat(c[2]," {").concat(c[1],"}")),c[2]=e),n&&(c[4]?(c[1]="@supports (".concat(c[4],") {").concat(c[1],"}"),c[4]=n):c[4]="".concat(n)),o.push(c))}},o}},601(r){r.exports=function(r){return r[1]}},72(r){var o=[];function e(r){for(var e=-1,t=0;t<o.length;t++)if(o[t].identifier===r){e=t;break}return e}function t(r,t){for(var n={},a=[],i=0;i<r.length;i++){var l=r[i],s=t.base?l[0]+t.base:l[0],p=n[s]||0,c="".concat(s," ").concat(p);n[s]=p+1;var u=e(c),d={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==u)o[u].references++,o[u].updater(d);else{var f=function(r,o){var e=o.domAPI(o);return e.update(r),function(o){o?(o.css!==r.css||o.media!==r.media||o.sourceMap!==r.sourceMap||o.supports!==r.supports||o.layer!==r.layer)&&e.update(r=o):e.remove()}}(d,t);t.byIndex=i,o.splice(i,0,{identifier:c,updater:f,references:1})}a.push(c)}return a}r.exports=function(r,n){var a=t(r=r||[],n=n||{});return function(r){r=r||[];for(var i=0;i<a.length;i++){var l=e(a[i]);o[l].references--}for(var s=t(r,n),p=0;p<a.length;p++){var c=e(a[p]);0===o[c].references&&(o[c].updater(),o.splice(c,1))}a=s}}},659(r){var o={};r.exports=function(r,e){var t=function(r){if(void 0===o[r]){var e=document.querySelector(r);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(r){e=null}o[r]=e}return o[r]}(r);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(e)}},540(r){r.exports=function(r){var o=document.createElement("style");return r.setAttributes(o,r.attributes),r.insert(o,r.options),o}},56(r,o,e){r.exports=function(r){var o=e.nc;o&&r.setAttribute("nonce",o)}},825(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var o=r.insertStyleElement(r);return{update:function(e){var t,n,a;t="",e.supports&&(t+="@supports (".concat(e.supports,") {")),e.media&&(t+="@media ".concat(e.media," {")),(n=void 0!==e.layer)&&(t+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),t+=e.css,n&&(t+="}"),e.media&&(t+="}"),e.supports&&(t+="}"),(a=e.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),r.styleTagTransform(t,o,r.options)},remove:function(){var r;null===(r=o).parentNode||r.parentNode.removeChild(r)}}}},113(r){r.exports=function(r,o){if(o.styleSheet)o.styleSheet.cssText=r;else{for(;o.firstChild;)o.removeChild(o.firstChild);o.appendChild(document.createTextNode(r))}}},579(r,o,e){var t=e(72),n=e.n(t),a=e(825),i=e.n(a),l=e(659),s=e.n(l),p=e(56),c=e.n(p),u=e(540),d=e.n(u),f=e(113),b=e.n(f),v=e(475),w={};w.styleTagTransform=b(),w.setAttributes=c(),w.insert=s().bind(null,"head"),w.domAPI=i(),w.insertStyleElement=d(),n()(v.A,w),v.A&&v.A.locals&&v.A.locals}}]);