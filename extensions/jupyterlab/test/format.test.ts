/* Unit tests of src/format.ts (the numbers and the loss sparkline the side panel and the status bar show), compiled
   by tests/extensions/jupyterlab/test_ts_units.py with the extension's TypeScript and run by `node --test`. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fmtLoss, fmtScale, fmtSteps, sparkline } from '../src/format';

test('a loss shows 4 significant digits, a missing one a dash', () => {
  assert.equal(fmtLoss(2.718281828), '2.718');
  assert.equal(fmtLoss(0.000123456), '0.0001235');
  assert.equal(fmtLoss(null), '–');
  assert.equal(fmtLoss(undefined), '–');
});

test('a loss scale that is a power of two from 2^4 shows as 2^n, others to 3 digits, none without scaling', () => {
  assert.equal(fmtScale(65536), '2^16');
  assert.equal(fmtScale(2 ** -14), '2^-14');
  assert.equal(fmtScale(8), '8.00'); // 2^3: too small to be worth the notation
  assert.equal(fmtScale(1000), '1.00e+3');
  assert.equal(fmtScale(null), 'none');
});

test('steps show as step/total, an unknown total as ?', () => {
  assert.equal(fmtSteps(3, 40), '3/40');
  assert.equal(fmtSteps(0, null), '0/?');
});

/* A minimal SVG document: sparkline only creates elements, sets attributes and appends children. */
class FakeElement {
  attributes: { [name: string]: string } = {};
  children: FakeElement[] = [];
  textContent = '';
  constructor(readonly tag: string) {}
  setAttribute(name: string, value: string): void {
    this.attributes[name] = value;
  }
  appendChild(child: FakeElement): FakeElement {
    this.children.push(child);
    return child;
  }
}
(globalThis as any).document = { createElementNS: (_ns: string, tag: string) => new FakeElement(tag) };

function pointsOf(svg: any): [number, number][] {
  const line = svg.children.find((c: FakeElement) => c.tag === 'polyline');
  return line.attributes.points.split(' ').map((p: string) => p.split(',').map(Number) as [number, number]);
}

test('the sparkline spans its box: first step at the left, lowest loss at the bottom', () => {
  const svg: any = sparkline([[1, 4], [2, null], [3, 2], [4, 1]], 60, 100, 20);
  const pts = pointsOf(svg);
  assert.equal(pts.length, 3); // the step without a loss (null) is left out
  assert.deepEqual(pts[0], [2, 2]); // x at the left pad, the highest loss at the top pad
  assert.deepEqual(pts[2], [98, 18]); // the last step at the right, the lowest loss at the bottom
  assert.equal(svg.attributes.viewBox, '0 0 100 20');
  const title = svg.children.find((c: FakeElement) => c.tag === 'title');
  assert.equal(title.textContent, 'loss 4.000 → 1.000 (steps 1–4)');
});

test('a long series is thinned to about the limit, keeping its newest point', () => {
  const series: [number, number][] = Array.from({ length: 1000 }, (_, i) => [i + 1, 1000 - i]);
  const pts = pointsOf(sparkline(series, 60));
  assert.ok(pts.length <= 61 && pts.length >= 50, `${pts.length} points`);
  assert.equal(pts[pts.length - 1][0], 218); // step 1000 at the right edge (width 220, pad 2)
});

test('fewer than two finite points draw nothing', () => {
  assert.equal((sparkline([[1, 2], [2, null]], 60) as any).children.length, 0);
  assert.equal((sparkline([], 60) as any).children.length, 0);
});
