/* Numbers and the loss sparkline, as the side panel and the status bar show them. */

export function fmtLoss(loss: number | null | undefined): string {
  return loss === null || loss === undefined ? '–' : loss.toPrecision(4);
}

export function fmtScale(scale: number | null | undefined): string {
  if (scale === null || scale === undefined) {
    return 'none';
  }
  const log2 = Math.log2(scale);
  return Number.isInteger(log2) && Math.abs(log2) >= 4 ? `2^${log2}` : scale.toPrecision(3);
}

export function fmtSteps(step: number, total: number | null): string {
  return `${step}/${total ?? '?'}`;
}

const SVG = 'http://www.w3.org/2000/svg';

/** An inline SVG polyline of the finite points (the newest ones if there are more than ``limit``). */
export function sparkline(
  points: [number, number | null][],
  limit: number,
  width = 220,
  height = 28
): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'wb-sparkline');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  const stride = Math.max(1, Math.ceil(points.length / limit));
  const shown = points.filter((p, i) => p[1] !== null && (i % stride === 0 || i === points.length - 1));
  if (shown.length < 2) {
    return svg;
  }
  const xs = shown.map(p => p[0]);
  const ys = shown.map(p => p[1] as number);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const pad = 2;
  const sx = (x: number) => pad + ((x - x0) / (x1 - x0 || 1)) * (width - 2 * pad);
  const sy = (y: number) => height - pad - ((y - y0) / (y1 - y0 || 1)) * (height - 2 * pad);
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', shown.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1] as number).toFixed(1)}`).join(' '));
  svg.appendChild(line);
  const title = document.createElementNS(SVG, 'title');
  title.textContent = `loss ${fmtLoss(ys[0])} → ${fmtLoss(ys[ys.length - 1])} (steps ${x0}–${x1})`;
  svg.appendChild(title);
  return svg;
}
