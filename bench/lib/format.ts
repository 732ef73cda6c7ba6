/** Formats like the benchmarks' own line: 0 decimals from 100, 1 from 10, else 2; thousands grouped. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  const s = abs >= 100 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : value.toFixed(2);
  const [whole, fraction] = s.split('.');
  const grouped = (whole as string).replace(/\B(?=(\d{3})+$)/g, ',');
  return fraction === undefined ? grouped : `${grouped}.${fraction}`;
}
