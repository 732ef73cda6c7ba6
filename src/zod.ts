// Every schema of Baton's is built with zod's functional API, `zod/mini`: its schemas carry no
// methods, so building the ones a start-up checks costs a fraction of the classic API's
// (bench/benchmarks/footprint.ts). Modules import this file as `import * as z from '../zod'`.
//
// Named, not `export *`: the bundle then keeps only what is called, where a star re-export
// would carry the whole API and every locale.
//
// The classic API sets English messages the first time it builds a schema; the functional one
// does not, so this does the same, once, unless the app chose a locale of its own.
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

if (!config().localeError) config(en());

export {
  _default,
  array,
  boolean,
  catch,
  custom,
  discriminatedUnion,
  enum,
  gte,
  guid,
  int,
  lazy,
  literal,
  lte,
  maxLength,
  minLength,
  nonnegative,
  nullable,
  number,
  object,
  optional,
  partial,
  pipe,
  positive,
  record,
  refine,
  regex,
  strictObject,
  string,
  transform,
  union,
  unknown,
} from 'zod/mini';
export type { core, infer, output, ZodMiniType } from 'zod/mini';
