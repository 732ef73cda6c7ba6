/**
 * C0 and C1 control characters, DEL, and the Unicode marks that reorder text on screen. In text
 * from storage or a queue (a failure's reason, a holder's name) written to a terminal or a log,
 * they would let a forged value move the cursor, retitle the window, set the clipboard (escape
 * sequences), or make one log line look like two.
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const CONTROLS_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string): string =>
  c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * The text with its control characters written as escapes (`\n`, `\u001b`), so what a terminal
 * shows is what was stored. `keepNewlines` leaves line breaks alone, for text that is meant to
 * span lines (a report); JSON output needs none of this, JSON escapes them itself.
 */
export function visible(text: string, options: { keepNewlines?: boolean } = {}): string {
  return text.replace(options.keepNewlines ? CONTROLS_BUT_NEWLINE : CONTROLS, escape);
}
