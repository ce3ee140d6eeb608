import { expect } from 'chai';
import type { Decider, DomainEvent } from '../../src/commands/handler.js';

// given(events) / when(command) / then(events): a decider's rules read as the stream's story. The
// state is the fold of the given events, exactly as the command handler folds what it reads.

export function deciderSpec<Command, State, Event extends DomainEvent>(decider: Decider<Command, State, Event>) {
  return {
    given: (...events: Event[]) => ({
      when: (command: Command) => {
        const state = events.reduce((s, e) => decider.evolve(s, e), decider.initialState);
        const decided = async () => decider.decide(command, state);
        return {
          then: async (expected: Event[]) => expect(await decided()).to.deep.equal(expected),
          thenNothing: async () => expect(await decided()).to.deep.equal([]),
          thenThrows: async (check: (error: unknown) => void) => {
            let thrown: unknown;
            try {
              await decided();
            } catch (error) {
              thrown = error;
            }
            expect(thrown, 'the command should have been refused').to.not.equal(undefined);
            check(thrown);
          },
        };
      },
    }),
  };
}
