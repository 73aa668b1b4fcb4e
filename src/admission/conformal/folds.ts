// Folds by whole group (a collection round, a (round, load) block): the unit of exchangeability is
// the run, not the request.
//
// Why whole groups: requests that shared a queue are correlated, and inside an overloaded block the
// queue grows monotonically, so a split by time inside a block puts the deepest queues in one fold
// only (the reference measured coverage collapse to 0.34 that way). Here a group's rows always land
// in one fold together, in their original order; there is no way to ask for a split inside a group.
//
// Roles are types: a Fold<'train'> is not a Fold<'test'>, folds are minted only by `splitFolds`
// and `holdOutSlice`, and a held-out slice can only be carved from a training fold. So a helper that
// takes a Fold<'heldout'> (select.ts) cannot be handed the test fold — a reviewer would see the
// signature change first.
//
// Complexity: splitFolds O(rows + groups); holdOutSlice O(rows of the fold).
//
// A fold with no rows of a planned group simply lacks it: `groups` lists the groups actually present.

import { bug } from '../../util/bug.ts';

/** A group key: a round number, or a string such as `${round}/${rate}`. */
export type GroupKey = string | number;

/** What a fold is for. 'heldout' is a slice of the training fold the model did not see. */
export type FoldRole = 'train' | 'calibration' | 'test' | 'heldout';

const MINT = Symbol('fold');

/** Rows of whole groups with one role. */
export class Fold<Role extends FoldRole, Row> {
  readonly role: Role;
  /** Rows in input order. */
  readonly rows: readonly Row[];
  /** rowGroups[i] is the group of rows[i]. */
  readonly rowGroups: readonly GroupKey[];
  /** The groups in this fold, in first-seen order. */
  readonly groups: readonly GroupKey[];
  /** A #private member also makes the class nominal: nothing shaped like a Fold is one. */
  readonly #groupSet: ReadonlySet<GroupKey>;

  /** Internal: use splitFolds or holdOutSlice (the token is not exported). */
  constructor(token: typeof MINT, role: Role, rows: readonly Row[], rowGroups: readonly GroupKey[]) {
    if (token !== MINT) bug('folds are made by splitFolds or holdOutSlice');
    if (rows.length !== rowGroups.length) bug(`${rows.length} rows with ${rowGroups.length} group keys`);
    this.role = role;
    this.rows = Object.freeze([...rows]);
    this.rowGroups = Object.freeze([...rowGroups]);
    this.#groupSet = new Set(rowGroups);
    this.groups = Object.freeze([...this.#groupSet]);
  }

  hasGroup(g: GroupKey): boolean {
    return this.#groupSet.has(g);
  }
}

/** Which groups go to which fold. Groups listed nowhere are returned as `unassigned` rows. */
export interface FoldPlan {
  readonly train: readonly GroupKey[];
  readonly calibration: readonly GroupKey[];
  readonly test: readonly GroupKey[];
}

export interface Folds<Row> {
  readonly train: Fold<'train', Row>;
  readonly calibration: Fold<'calibration', Row>;
  readonly test: Fold<'test', Row>;
  /** Rows whose group the plan does not name (dropped, but counted, so nothing vanishes silently). */
  readonly numUnassigned: number;
}

/** Splits rows into train / calibration / test by whole group. A group named twice in the plan throws. */
export function splitFolds<Row>(rows: readonly Row[], groupOf: (row: Row) => GroupKey, plan: FoldPlan): Folds<Row> {
  const roleOf = new Map<GroupKey, 'train' | 'calibration' | 'test'>();
  for (const role of ['train', 'calibration', 'test'] as const) {
    for (const g of plan[role]) {
      const prev = roleOf.get(g);
      if (prev !== undefined) throw new RangeError(`splitFolds: expected each group in one fold, got ${String(g)} in ${prev} and ${role}`);
      roleOf.set(g, role);
    }
  }
  const out = { train: [] as Row[], calibration: [] as Row[], test: [] as Row[] };
  const keys = { train: [] as GroupKey[], calibration: [] as GroupKey[], test: [] as GroupKey[] };
  let numUnassigned = 0;
  for (const row of rows) {
    const g = groupOf(row);
    const role = roleOf.get(g);
    if (role === undefined) {
      numUnassigned++;
      continue;
    }
    out[role].push(row);
    keys[role].push(g);
  }
  return {
    train: new Fold(MINT, 'train', out.train, keys.train),
    calibration: new Fold(MINT, 'calibration', out.calibration, keys.calibration),
    test: new Fold(MINT, 'test', out.test, keys.test),
    numUnassigned,
  };
}

/** The training fold cut in two by whole group: what the model is fitted on, and the held-out slice. */
export interface TrainingSplit<Row> {
  readonly fit: Fold<'train', Row>;
  readonly heldOut: Fold<'heldout', Row>;
}

/** Carves a held-out slice out of a training fold: the named groups go to the slice, the rest stay for fitting. */
export function holdOutSlice<Row>(train: Fold<'train', Row>, heldOutGroups: readonly GroupKey[]): TrainingSplit<Row> {
  if (train.role !== 'train') bug(`holdOutSlice takes the training fold, got the ${String(train.role)} fold`);
  for (const g of heldOutGroups) {
    if (!train.hasGroup(g)) throw new RangeError(`holdOutSlice: expected groups of the training fold, got ${String(g)}`);
  }
  const held = new Set(heldOutGroups);
  if (held.size === 0 || held.size === train.groups.length) {
    throw new RangeError(`holdOutSlice: expected between 1 and ${train.groups.length - 1} held-out groups, got ${held.size}`);
  }
  const parts = { fit: [] as Row[], fitKeys: [] as GroupKey[], slice: [] as Row[], sliceKeys: [] as GroupKey[] };
  train.rows.forEach((row, i) => {
    const g = train.rowGroups[i]!;
    if (held.has(g)) {
      parts.slice.push(row);
      parts.sliceKeys.push(g);
    } else {
      parts.fit.push(row);
      parts.fitKeys.push(g);
    }
  });
  return { fit: new Fold(MINT, 'train', parts.fit, parts.fitKeys), heldOut: new Fold(MINT, 'heldout', parts.slice, parts.sliceKeys) };
}
