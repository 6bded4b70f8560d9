"""The stripe scheduler: a chosen cascader Proposal, or the layer-by-layer copy-constants
schedule, as an explicit `cascader.ir.schedule.Schedule` of addressed buffers and steps.
`policies` makes the two schedules, `point_scheduler` chooses the proposal that really fits
a pool."""
