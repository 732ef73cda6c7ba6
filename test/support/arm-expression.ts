/**
 * ARM template expressions as trees. A JSON string that starts with `[` and ends with `]` is an
 * expression (`[concat('a', parameters('b')).c[0]]`); one that starts with `[[` is the literal
 * text without its first bracket; any other string is a literal. Every JSON value maps to a node,
 * so a template can be read as one tree of literals, arrays, objects and calls.
 */
export type Expr =
  | { kind: 'string'; value: string }
  | { kind: 'number'; value: number }
  | { kind: 'boolean'; value: boolean }
  | { kind: 'null' }
  | { kind: 'array'; items: Expr[] }
  | { kind: 'object'; entries: { key: Expr; value: Expr }[] }
  /** `name(args)`; a user-defined function is `namespace.member` (`__bicep.chart`). */
  | { kind: 'call'; name: string; args: Expr[] }
  | { kind: 'property'; target: Expr; name: string }
  | { kind: 'index'; target: Expr; index: Expr };

export const str = (value: string): Expr => ({ kind: 'string', value });
export const call = (name: string, ...args: Expr[]): Expr => ({ kind: 'call', name, args });

/** The tree of any JSON value from a template. */
export function fromJson(value: unknown): Expr {
  if (typeof value === 'string') return parseArmString(value);
  if (typeof value === 'number') return { kind: 'number', value };
  if (typeof value === 'boolean') return { kind: 'boolean', value };
  if (value === null || value === undefined) return { kind: 'null' };
  if (Array.isArray(value)) return { kind: 'array', items: value.map(fromJson) };
  return {
    kind: 'object',
    entries: Object.entries(value as Record<string, unknown>).map(([key, v]) => ({
      key: parseArmString(key),
      value: fromJson(v),
    })),
  };
}

/** A template string: an expression, an escaped literal (`[[...`), or a literal. */
export function parseArmString(text: string): Expr {
  if (text.startsWith('[[')) return str(text.slice(1));
  if (text.startsWith('[') && text.endsWith(']')) return parseExpression(text.slice(1, -1));
  return str(text);
}

/** The inside of `[...]`. Throws on anything the ARM grammar does not allow. */
export function parseExpression(source: string): Expr {
  let at = 0;
  const fail = (what: string): never => {
    throw new Error(`ARM expression: ${what} at ${at} in [${source}]`);
  };
  const space = () => {
    while (at < source.length && /\s/.test(source[at] as string)) at++;
  };
  const eat = (ch: string) => {
    space();
    if (source[at] !== ch) fail(`expected ${ch}`);
    at++;
  };
  const primary = (): Expr => {
    space();
    const ch = source[at];
    if (ch === "'") {
      let value = '';
      at++;
      for (;;) {
        if (at >= source.length) fail('unterminated string');
        if (source[at] === "'") {
          if (source[at + 1] === "'") {
            value += "'";
            at += 2;
            continue;
          }
          at++;
          return str(value);
        }
        value += source[at];
        at++;
      }
    }
    const number = /^-?\d+(\.\d+)?/.exec(source.slice(at));
    if (number) {
      at += number[0].length;
      return { kind: 'number', value: Number(number[0]) };
    }
    const name = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)?/.exec(source.slice(at));
    if (!name) return fail('expected a string, a number or a function');
    at += name[0].length;
    space();
    // `ns.member(` is a user-defined function; `fn().prop` is handled by postfix below.
    if (source[at] !== '(') return fail(`${name[0]} is not called`);
    at++;
    const args: Expr[] = [];
    space();
    if (source[at] === ')') {
      at++;
    } else {
      for (;;) {
        args.push(postfix());
        space();
        if (source[at] === ',') {
          at++;
          continue;
        }
        eat(')');
        break;
      }
    }
    return call(name[0], ...args);
  };
  const postfix = (): Expr => {
    let expr = primary();
    for (;;) {
      space();
      if (source[at] === '.') {
        at++;
        space();
        const name = /^[A-Za-z_$][\w$]*/.exec(source.slice(at));
        if (!name) return fail('expected a property name');
        at += name[0].length;
        expr = { kind: 'property', target: expr, name: name[0] };
      } else if (source[at] === '[') {
        at++;
        const index = postfix();
        eat(']');
        expr = { kind: 'index', target: expr, index };
      } else {
        return expr;
      }
    }
  };
  const expr = postfix();
  space();
  if (at !== source.length) fail('unexpected text');
  return expr;
}

/** The expression as ARM would write it (for messages, and to compare two trees). */
export function show(expr: Expr): string {
  switch (expr.kind) {
    case 'string':
      return `'${expr.value.replace(/'/g, "''")}'`;
    case 'number':
      return String(expr.value);
    case 'boolean':
      return expr.value ? 'true()' : 'false()';
    case 'null':
      return 'null()';
    case 'array':
      return `createArray(${expr.items.map(show).join(', ')})`;
    case 'object':
      return `createObject(${expr.entries.flatMap(({ key, value }) => [show(key), show(value)]).join(', ')})`;
    case 'call':
      return `${expr.name}(${expr.args.map(show).join(', ')})`;
    case 'property':
      return `${show(expr.target)}.${expr.name}`;
    case 'index':
      return `${show(expr.target)}[${show(expr.index)}]`;
  }
}

export const sameExpr = (a: Expr, b: Expr) => show(a) === show(b);

declare const named: unique symbol;
/**
 * A call known to be of one function. The brand keeps `isCall` from narrowing the other way: an
 * expression that is not a call of `concat` may still be a call of `union`.
 */
export type CallOf = Extract<Expr, { kind: 'call' }> & { readonly [named]: true };

/** Whether `expr` is a call of `name` (case-insensitive, as ARM's function names are). */
export function isCall(expr: Expr | undefined, name: string): expr is CallOf {
  return expr?.kind === 'call' && expr.name.toLowerCase() === name.toLowerCase();
}

/** The value of a string literal, or undefined. */
export const literal = (expr: Expr | undefined): string | undefined => (expr?.kind === 'string' ? expr.value : undefined);

/** Every node of the tree, depth first, the root included. */
export function* walk(expr: Expr): Generator<Expr> {
  yield expr;
  switch (expr.kind) {
    case 'array':
      for (const item of expr.items) yield* walk(item);
      break;
    case 'object':
      for (const { key, value } of expr.entries) {
        yield* walk(key);
        yield* walk(value);
      }
      break;
    case 'call':
      for (const arg of expr.args) yield* walk(arg);
      break;
    case 'property':
      yield* walk(expr.target);
      break;
    case 'index':
      yield* walk(expr.target);
      yield* walk(expr.index);
      break;
    default:
      break;
  }
}

/** Every string literal in the tree: JSON strings, and the literals inside expressions. */
export function stringsIn(expr: Expr): string[] {
  return [...walk(expr)].flatMap((node) => (node.kind === 'string' ? [node.value] : []));
}

/** Rebuilds the tree bottom-up, `map` replacing a node (after its children) or returning it. */
export function rewrite(expr: Expr, map: (node: Expr) => Expr): Expr {
  switch (expr.kind) {
    case 'array':
      return map({ kind: 'array', items: expr.items.map((item) => rewrite(item, map)) });
    case 'object':
      return map({
        kind: 'object',
        entries: expr.entries.map(({ key, value }) => ({ key: rewrite(key, map), value: rewrite(value, map) })),
      });
    case 'call':
      return map(call(expr.name, ...expr.args.map((arg) => rewrite(arg, map))));
    case 'property':
      return map({ kind: 'property', target: rewrite(expr.target, map), name: expr.name });
    case 'index':
      return map({ kind: 'index', target: rewrite(expr.target, map), index: rewrite(expr.index, map) });
    default:
      return map(expr);
  }
}
