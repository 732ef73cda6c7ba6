import { describe, expect, it } from 'vitest';
import { fromJson, parseArmString, show } from './arm-expression';
import { conditionsOf, entriesOf, loadTemplate, rootParameter, toRoot, type ArmTemplateJson } from './arm-template';

// The reader the infra rules stand on (test/support/arm-template.ts), on small templates written
// the way `bicep build` writes them.

describe('ARM expressions', () => {
  it('parse calls, escaped quotes, member access and indexes', () => {
    const expr = parseArmString("[concat('it''s', parameters('a')).b[0]['c']]");
    expect(expr).toEqual({
      kind: 'index',
      target: {
        kind: 'index',
        target: {
          kind: 'property',
          target: {
            kind: 'call',
            name: 'concat',
            args: [
              { kind: 'string', value: "it's" },
              { kind: 'call', name: 'parameters', args: [{ kind: 'string', value: 'a' }] },
            ],
          },
          name: 'b',
        },
        index: { kind: 'number', value: 0 },
      },
      index: { kind: 'string', value: 'c' },
    });
    expect(show(expr)).toBe("concat('it''s', parameters('a')).b[0]['c']");
  });

  it('read [[ as a literal bracket and anything not in brackets as text', () => {
    expect(parseArmString('[[not an expression]')).toEqual({ kind: 'string', value: '[not an expression]' });
    expect(parseArmString('plain [text')).toEqual({ kind: 'string', value: 'plain [text' });
  });

  it('parse user-defined function calls with their namespace', () => {
    expect(show(parseArmString("[__bicep.chart('t', -1)]"))).toBe("__bicep.chart('t', -1)");
  });

  it('refuse what the grammar does not allow', () => {
    expect(() => parseArmString("[concat('a']")).toThrow(/ARM expression/);
    expect(() => parseArmString('[parameters]')).toThrow(/is not called/);
  });
});

/** main.bicep with one module whose parameter `level` it binds from its own `logLevel`. */
const template: ArmTemplateJson = {
  $schema: 'https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#',
  parameters: { logLevel: { type: 'string', defaultValue: 'info' }, env: { type: 'string' } },
  variables: { tags: { 'azd-env-name': "[parameters('env')]" } },
  resources: [
    {
      type: 'Microsoft.Resources/deployments',
      name: 'app',
      resourceGroup: 'rg',
      condition: "[not(empty(parameters('env')))]",
      properties: {
        parameters: { level: { value: "[parameters('logLevel')]" }, tags: { value: "[variables('tags')]" } },
        template: {
          languageVersion: '2.0',
          metadata: { _generator: { templateHash: '42' } },
          parameters: { level: { type: 'string' }, tags: { type: 'object' }, size: { type: 'int', defaultValue: 3 } },
          variables: { debug: "[if(equals(parameters('level'), 'debug'), createObject('LEVEL', 'Debug'), createObject())]" },
          functions: [
            {
              namespace: '__bicep',
              members: {
                twice: { parameters: [{ name: 'x' }], output: { value: "[concat(parameters('x'), parameters('x'))]" } },
              },
            },
          ],
          resources: {
            settings: {
              type: 'Microsoft.Web/sites/config',
              name: 'app/appsettings',
              condition: "[equals(parameters('size'), 3)]",
              properties: "[union(createObject('A', __bicep.twice(parameters('level'))), variables('debug'))]",
            },
            other: { existing: true, type: 'Microsoft.Web/sites', name: 'x' },
          },
        },
      },
    },
  ],
};

describe('a compiled template', () => {
  const model = loadTemplate(template, { 'infra/main.bicep': 'none', 'infra/modules/app.bicep': '42' });
  const settings = model.resources.find((r) => r.symbol === 'settings');

  it('flattens modules into scopes named by their file, with every resource in its scope', () => {
    expect(model.scopes.map((s) => s.file)).toEqual(['infra/main.bicep', 'infra/modules/app.bicep']);
    expect(model.resources.map((r) => [r.scope.file, r.label, r.existing])).toEqual([
      ['infra/main.bicep', 'app', false],
      ['infra/modules/app.bicep', 'settings', false],
      ['infra/modules/app.bicep', 'other', true],
    ]);
  });

  it("follows a module's parameters and variables up to main.bicep's parameters, and inlines functions", () => {
    if (!settings) throw new Error('no settings');
    const value = toRoot(settings.scope, fromJson(settings.json.properties));
    expect(show(value)).toBe(
      "union(createObject('A', concat(parameters('logLevel'), parameters('logLevel'))), " +
        "if(equals(parameters('logLevel'), 'debug'), createObject('LEVEL', 'Debug'), createObject()))",
    );
    expect(rootParameter(toRoot(settings.scope, parseArmString("[parameters('level')]")))).toBe('logLevel');
    // A module parameter left unbound takes its default; with none, it is not main.bicep's.
    expect(show(toRoot(settings.scope, parseArmString("[parameters('size')]")))).toBe('3');
    expect(rootParameter(toRoot(settings.scope, parseArmString("[parameters('missing')]")))).toBeUndefined();
  });

  it('reads an object-valued expression as entries, each under its condition', () => {
    if (!settings) throw new Error('no settings');
    const { entries, opaque } = entriesOf(toRoot(settings.scope, fromJson(settings.json.properties)));
    expect(opaque).toEqual([]);
    expect(entries.map((e) => [e.key, show(e.value), e.when.map(show)])).toEqual([
      ['A', "concat(parameters('logLevel'), parameters('logLevel'))", []],
      ['LEVEL', "'Debug'", ["equals(parameters('logLevel'), 'debug')"]],
    ]);
    expect(entriesOf(parseArmString("[parameters('x')]")).opaque).toHaveLength(1);
  });

  it("gives a resource's conditions with its modules'", () => {
    if (!settings) throw new Error('no settings');
    expect(conditionsOf(settings).map(show)).toEqual(["not(empty(parameters('env')))", 'equals(3, 3)']);
  });
});
