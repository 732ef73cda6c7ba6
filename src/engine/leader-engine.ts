import { Coordinator } from './coordinator';

/**
 * The coordinator, built when this instance first leads. Only a leader runs it: the package loads
 * its code then (build/bundle.mjs), so an instance that never leads (a follower, or one scaled
 * out for queue load) never compiles the planner, the drain, the finalizer or the hedger.
 */
export function createCoordinator(ctx: ConstructorParameters<typeof Coordinator>[0]): Coordinator {
  return new Coordinator(ctx);
}
