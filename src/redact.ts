/** Masks key material that SDK errors and URLs can carry, so they are safe to log. */
export function redactSecrets(text: string): string {
  return text
    .replace(/(AccountKey\s*=\s*)[^;\s"'&]+/gi, '$1***')
    .replace(/(SharedAccessSignature\s*=\s*)[^;\s"']+/gi, '$1***')
    .replace(/([?&;\s"']sig(?:=|%3D))[^&;\s"']+/gi, '$1***')
    .replace(/^(sig(?:=|%3D))[^&;\s"']+/i, '$1***')
    .replace(/(authorization["']?\s*[:=]\s*["']?)[^"'\r\n,}]+/gi, '$1***')
    .replace(/\b(Bearer|SharedKey)\s+[A-Za-z0-9\-._~+/:=]+/g, '$1 ***');
}
