// Ridge least squares from normal-equation sums, the one solver both the offline throughput
// baseline and its online version use (so "online equals batch" compares sums, not solvers), and
// the scheduler's step-cost fit (engine/scheduler/step-cost.ts) too: it sits here, under both.
//
// Solves (A + λ·diag(A)) β = b, where A = XᵀX and b = Xᵀy (k × k, row-major, k ≤ 8 or so). The
// ridge is relative to each column's own sum of squares, so it means the same thing whether a
// column counts tokens (10³) or is the constant 1. The system is solved in Jacobi-scaled form,
// S = D⁻¹AD⁻¹ with D = sqrt(diag A), because raw token columns and an intercept differ in scale
// by orders of magnitude and an unscaled Cholesky loses those digits. A column that is zero on
// every row gets coefficient 0 (given a ridge).
//
// Complexity: O(k³) time; no allocation beyond the caller's scratch (k² + k values).

import { bug } from './bug.ts';

/**
 * Smallest squared pivot accepted. S has a unit diagonal, so a pivot² is 1 − R² of that column on
 * the ones before it: below 1e-12 the columns are collinear to working precision and the
 * coefficients would be rounding noise. Any ridge above 1e-12 keeps every pivot above it.
 */
const MIN_PIVOT = 1e-12;

/** Writes β into `out`; false when the scaled system is not positive definite (degenerate data). */
export function solveRidge(A: Float64Array, b: Float64Array, k: number, ridge: number, out: Float64Array, scratch: Float64Array): boolean {
  if (A.length < k * k || b.length < k || out.length < k || scratch.length < k * k + k) bug(`solveRidge(k=${k}) with undersized buffers`);
  const L = scratch; // k × k lower factor, then scales in scratch[k², k² + k)
  const scaleAt = k * k;
  for (let i = 0; i < k; i++) {
    const d = A[i * k + i]!;
    scratch[scaleAt + i] = d > 0 ? 1 / Math.sqrt(d) : 0;
  }
  // Cholesky of S + λI, where S[i][j] = A[i][j]·s_i·s_j (a zero column becomes the row λ·e_i).
  for (let i = 0; i < k; i++) {
    const si = scratch[scaleAt + i]!;
    for (let j = 0; j <= i; j++) {
      const sj = scratch[scaleAt + j]!;
      let sum = A[i * k + j]! * si * sj + (i === j ? ridge : 0);
      for (let p = 0; p < j; p++) sum -= L[i * k + p]! * L[j * k + p]!;
      if (i === j) {
        if (!(sum > MIN_PIVOT)) return false;
        L[i * k + i] = Math.sqrt(sum);
      } else {
        L[i * k + j] = sum / L[j * k + j]!;
      }
    }
  }
  // Forward then back substitution on the scaled right-hand side s ∘ b; β = s ∘ z.
  for (let i = 0; i < k; i++) {
    let sum = b[i]! * scratch[scaleAt + i]!;
    for (let p = 0; p < i; p++) sum -= L[i * k + p]! * out[p]!;
    out[i] = sum / L[i * k + i]!;
  }
  for (let i = k - 1; i >= 0; i--) {
    let sum = out[i]!;
    for (let p = i + 1; p < k; p++) sum -= L[p * k + i]! * out[p]!;
    out[i] = sum / L[i * k + i]!;
  }
  for (let i = 0; i < k; i++) out[i] = out[i]! * scratch[scaleAt + i]!;
  return true;
}

/** Adds weight·(z zᵀ, z·y) to the sums, z = zs[at, at + k): O(k²), no allocation. */
export function accumulate(A: Float64Array, b: Float64Array, zs: Float64Array, at: number, k: number, y: number, weight: number): void {
  for (let i = 0; i < k; i++) {
    const wz = weight * zs[at + i]!;
    b[i] = b[i]! + wz * y;
    for (let j = 0; j < k; j++) A[i * k + j] = A[i * k + j]! + wz * zs[at + j]!;
  }
}
