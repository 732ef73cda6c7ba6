/**
 * Blob metadata carries ASCII only, so names and ranks are written URI-encoded; a value that
 * does not decode (written by hand, or damaged) is read as it is.
 */
export function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
