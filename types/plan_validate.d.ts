/**
 * Each binding's access in binding order: 'read', 'read_write' or 'uniform'.
 * @param {string} wgsl
 * @returns {string[]}
 */
export function bindingAccess(wgsl: string): string[];
/** @param {string} wgsl @returns {number[] | null} the literal @workgroup_size, padded to 3 */
export function workgroupSize(wgsl: string): number[] | null;
/**
 * Check a parsed plan against WebGPU's rules and `limits` (GPUSupportedLimits or a plain
 * object with camelCase names; missing limits are not checked).
 * @param {object} plan a parsePlan result
 * @param {Record<string, number>} [limits]
 * @throws {PlanError} naming the dispatch and its op
 */
export function validatePlan(plan: object, limits?: Record<string, number>): void;
