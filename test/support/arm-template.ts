import { call, fromJson, isCall, literal, rewrite, sameExpr, show, str, type Expr } from './arm-expression';

/**
 * A compiled template (`bicep build` output) read as data: every module (a nested
 * `Microsoft.Resources/deployments` with its template inline) becomes a scope, every resource
 * knows its scope, and any expression can be followed up to main.bicep's parameters.
 */

export interface ArmTemplateJson {
  $schema?: string;
  languageVersion?: string;
  metadata?: { _generator?: { templateHash?: string } };
  parameters?: Record<string, ArmParameterJson>;
  variables?: Record<string, unknown>;
  functions?: { namespace: string; members: Record<string, ArmFunctionJson> }[];
  resources?: ArmResourceJson[] | Record<string, ArmResourceJson>;
  outputs?: Record<string, { type?: string; value?: unknown }>;
  [key: string]: unknown;
}

export interface ArmParameterJson {
  type: string;
  defaultValue?: unknown;
  allowedValues?: unknown[];
  minLength?: number;
  maxLength?: number;
  minValue?: number;
  maxValue?: number;
  metadata?: { description?: string; [key: string]: unknown };
  [key: string]: unknown;
}

interface ArmFunctionJson {
  parameters?: { name: string }[];
  output: { value: unknown };
}

export interface ArmResourceJson {
  type: string;
  name: string;
  existing?: boolean;
  condition?: unknown;
  properties?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface Scope {
  /** The Bicep file the template was compiled from, or a description when it is not known. */
  file: string;
  template: ArmTemplateJson;
  /** The deployment (module) that deploys this scope; undefined for main.bicep's. */
  deployment: ArmResource | undefined;
  resources: ArmResource[];
}

export interface ArmResource {
  scope: Scope;
  /** The symbolic name (languageVersion 2.0), or undefined in a resources array. */
  symbol: string | undefined;
  type: string;
  existing: boolean;
  json: ArmResourceJson;
  name: Expr;
  /** What the resource itself is deployed on (`if (...)`), or undefined. */
  condition: Expr | undefined;
  /** The resource for messages: its symbol, or its name. */
  label: string;
}

export interface ArmModel {
  root: Scope;
  scopes: Scope[];
  /** Every resource of every scope, the module deployments included. */
  resources: ArmResource[];
}

export const DEPLOYMENTS = 'Microsoft.Resources/deployments';

/**
 * `hashes` names the files: each Bicep file's own templateHash (bicep writes it into every
 * template it compiles, nested ones included) by path.
 */
export function loadTemplate(template: ArmTemplateJson, hashes: Readonly<Record<string, string>> = {}): ArmModel {
  const byHash = new Map(Object.entries(hashes).map(([path, hash]) => [hash, path]));
  const scopes: Scope[] = [];
  const resources: ArmResource[] = [];
  const load = (json: ArmTemplateJson, deployment: ArmResource | undefined, fallback: string): Scope => {
    const hash = json.metadata?._generator?.templateHash;
    const scope: Scope = {
      file: (hash !== undefined ? byHash.get(hash) : undefined) ?? fallback,
      template: json,
      deployment,
      resources: [],
    };
    scopes.push(scope);
    const listed = Array.isArray(json.resources)
      ? json.resources.map((r) => [undefined, r] as const)
      : Object.entries(json.resources ?? {});
    for (const [symbol, r] of listed) {
      const name = fromJson(r.name);
      const resource: ArmResource = {
        scope,
        symbol,
        type: r.type,
        existing: r.existing === true,
        json: r,
        name,
        condition: r.condition === undefined ? undefined : fromJson(r.condition),
        label: symbol ?? nameLabel(name),
      };
      scope.resources.push(resource);
      resources.push(resource);
      const inner = (r.properties as { template?: ArmTemplateJson } | undefined)?.template;
      if (r.type === DEPLOYMENTS && inner) load(inner, resource, `${scope.file} (module ${resource.label})`);
    }
    return scope;
  };
  const root = load(template, undefined, 'infra/main.bicep');
  return { root, scopes, resources };
}

/** A name for messages: the literal, or the expression. */
function nameLabel(name: Expr): string {
  return literal(name) ?? show(name);
}

/** The JSON under a dotted path of a resource (`properties.siteConfig.minTlsVersion`), as a tree. */
export function field(resource: ArmResource, path: string): Expr | undefined {
  let at: unknown = resource.json;
  for (const key of path.split('.')) {
    if (at === null || typeof at !== 'object' || !(key in at)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return fromJson(at);
}

/** A resource's JSON under a dotted path, as JSON. */
export function rawField(resource: ArmResource, path: string): unknown {
  let at: unknown = resource.json;
  for (const key of path.split('.')) {
    if (at === null || typeof at !== 'object' || !(key in at)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

/**
 * `expr` as main.bicep's template would write it: a module's parameter becomes what the module is
 * given for it, a variable its value, a user-defined function call its body, until only main.bicep's
 * parameters, literals and other functions are left.
 */
export function toRoot(scope: Scope, expr: Expr): Expr {
  return rewrite(inlineFunctions(scope, expr), (node) => {
    if (node.kind !== 'call') return node;
    const name = literal(node.args[0]);
    if (name === undefined) return node;
    if (isCall(node, 'variables')) {
      const variables = scope.template.variables ?? {};
      return name in variables ? toRoot(scope, fromJson(variables[name])) : node;
    }
    if (isCall(node, 'parameters') && scope.deployment) {
      const bindings = (scope.deployment.json.properties?.parameters ?? {}) as Record<string, { value?: unknown }>;
      const binding = bindings[name];
      // Without a binding the parameter takes its default, which is the module's own; with
      // neither, it is no parameter of main.bicep's, whatever its name.
      if (binding === undefined) {
        const fallback = scope.template.parameters?.[name]?.defaultValue;
        return fallback === undefined ? call('unboundModuleParameter', str(name)) : toRoot(scope, fromJson(fallback));
      }
      return toRoot(scope.deployment.scope, fromJson(binding.value));
    }
    return node;
  });
}

/** Calls of the template's user-defined functions (`__bicep.chart(...)`) replaced by their bodies. */
export function inlineFunctions(scope: Scope, expr: Expr): Expr {
  return rewrite(expr, (node) => {
    if (node.kind !== 'call' || !node.name.includes('.')) return node;
    const [namespace, member] = node.name.split('.') as [string, string];
    const fn = scope.template.functions?.find((f) => f.namespace === namespace)?.members[member];
    if (!fn) return node;
    const names = (fn.parameters ?? []).map((p) => p.name);
    const body = rewrite(fromJson(fn.output.value), (inner) => {
      const index = isCall(inner, 'parameters') ? names.indexOf(literal(inner.args[0]) ?? '') : -1;
      return index < 0 ? inner : (node.args[index] ?? inner);
    });
    return inlineFunctions(scope, body);
  });
}

/** `parameters('name')` of main.bicep, or undefined. */
export function rootParameter(expr: Expr | undefined): string | undefined {
  return isCall(expr, 'parameters') ? literal(expr.args[0]) : undefined;
}

/** One entry of an object-valued expression, and what it is set on. */
export interface Entry {
  key: string | undefined;
  keyExpr: Expr;
  value: Expr;
  /** Conditions, each of which must hold for the entry to be set (a false branch as `not(...)`). */
  when: Expr[];
}

/**
 * The entries of an object-valued expression (already `toRoot`): object literals, `createObject`,
 * `union` (every entry of every argument, in order), and both branches of `if`, each under its
 * condition. `opaque` holds what cannot be read as entries (a parameter of main.bicep, a reference).
 */
export function entriesOf(expr: Expr, when: Expr[] = []): { entries: Entry[]; opaque: Expr[] } {
  const entry = (keyExpr: Expr, value: Expr): Entry => ({ key: literal(keyExpr), keyExpr, value, when });
  if (expr.kind === 'object') return { entries: expr.entries.map(({ key, value }) => entry(key, value)), opaque: [] };
  if (isCall(expr, 'createObject')) {
    const entries: Entry[] = [];
    for (let i = 0; i + 1 < expr.args.length; i += 2) entries.push(entry(expr.args[i] as Expr, expr.args[i + 1] as Expr));
    return { entries, opaque: [] };
  }
  const merge = (parts: { entries: Entry[]; opaque: Expr[] }[]) => ({
    entries: parts.flatMap((p) => p.entries),
    opaque: parts.flatMap((p) => p.opaque),
  });
  if (isCall(expr, 'union')) return merge(expr.args.map((arg) => entriesOf(arg, when)));
  if (isCall(expr, 'if') && expr.args.length === 3) {
    const [condition, yes, no] = expr.args as [Expr, Expr, Expr];
    return merge([entriesOf(yes, [...when, condition]), entriesOf(no, [...when, call('not', condition)])]);
  }
  return { entries: [], opaque: [expr] };
}

/** The items of an array-valued expression (already `toRoot`): literals, `createArray`, `concat`. */
export function itemsOf(expr: Expr): Expr[] {
  if (expr.kind === 'array') return expr.items;
  if (isCall(expr, 'createArray')) return expr.args;
  if (isCall(expr, 'concat')) return expr.args.flatMap(itemsOf);
  return [expr];
}

/**
 * The text of a string-valued expression, holes left as `{0}`: a literal, or the pattern of a
 * `format`. Undefined for anything else.
 */
export function textOf(expr: Expr | undefined): string | undefined {
  if (expr === undefined) return undefined;
  if (expr.kind === 'string') return expr.value;
  if (isCall(expr, 'format')) return literal(expr.args[0]);
  return undefined;
}

/**
 * The resource type an id expression points at: `resourceId('type', ...)` (also under
 * `toLower`), or a symbolic `resourceId('symbol')` / `reference('symbol')` of languageVersion 2.0
 * resolved in `scope`. Undefined for anything else (`subscription().id`, `resourceGroup().id`).
 */
export function typeOfId(scope: Scope, expr: Expr | undefined): string | undefined {
  if (isCall(expr, 'toLower')) return typeOfId(scope, expr.args[0]);
  if (isCall(expr, 'resourceId') || isCall(expr, 'subscriptionResourceId')) {
    const first = literal(expr.args[0]);
    if (first === undefined) return undefined;
    if (first.includes('/')) return first;
    return scope.resources.find((r) => r.symbol === first)?.type;
  }
  return undefined;
}

/** Whether `expr` is the output `name` of a module (deployment) of the model, and which. */
export function moduleOutput(model: ArmModel, expr: Expr): { deployment: ArmResource; output: string } | undefined {
  // reference(<deployment id>, ...).outputs.<name>.value
  if (expr.kind !== 'property' || expr.name !== 'value') return undefined;
  const named = expr.target;
  if (named.kind !== 'property') return undefined;
  const outputs = named.target;
  if (outputs.kind !== 'property' || outputs.name !== 'outputs' || !isCall(outputs.target, 'reference')) return undefined;
  const id = outputs.target.args[0];
  if (!(isCall(id, 'extensionResourceId') || isCall(id, 'resourceId')) || id.args.length < 2) return undefined;
  const deploymentName = id.args[id.args.length - 1] as Expr;
  if (literal(id.args[id.args.length - 2]) !== DEPLOYMENTS) return undefined;
  const deployment = model.resources.find((r) => r.type === DEPLOYMENTS && sameExpr(toRoot(r.scope, r.name), deploymentName));
  return deployment ? { deployment, output: named.name } : undefined;
}

/** The scope a deployment resource deploys. */
export function scopeOf(model: ArmModel, deployment: ArmResource): Scope | undefined {
  return model.scopes.find((s) => s.deployment === deployment);
}

/** Every condition a resource is deployed under: its own, and its modules', as main.bicep writes them. */
export function conditionsOf(resource: ArmResource): Expr[] {
  const own = resource.condition === undefined ? [] : [toRoot(resource.scope, resource.condition)];
  const module = resource.scope.deployment;
  return module ? [...conditionsOf(module), ...own] : own;
}
