// Package schedule evaluates DeploySchedules: given a schedule and a time range it
// computes every target's intent intervals and the transition plans between them
// (docs/schedule.md). It never reads a clock: time is always an argument, so the controller,
// the timeline dry run and tests get the same answer for the same input.
package schedule
