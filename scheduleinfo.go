package txmq

import "strconv"

// ScheduleInfo describes a declared schedule, for operator tools (the dashboard's Schedules
// page when mounted in the app).
type ScheduleInfo struct {
	// Name is the schedule's name; Queue the queue it publishes to.
	Name, Queue string
	// Cron is its ScheduleConfig.Cron, as declared.
	Cron string
	// Missed is its policy for ticks missed while no node ran it.
	Missed Missed
	// DeclaredAt is the file and line of the Schedule call.
	DeclaredAt string
}

// ScheduleInfo returns the declared schedule name, false if this registry has none of that
// name.
func (r *Registry) ScheduleInfo(name string) (ScheduleInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.schedules[name]
	if !ok {
		return ScheduleInfo{}, false
	}
	return ScheduleInfo{Name: s.name, Queue: s.queue, Cron: s.cron, Missed: s.missed, DeclaredAt: s.site}, true
}

// String returns the policy's name: "SkipMissed" or "RunMissedOnce".
func (m Missed) String() string {
	switch m {
	case SkipMissed:
		return "SkipMissed"
	case RunMissedOnce:
		return "RunMissedOnce"
	}
	return "Missed(" + strconv.Itoa(int(m)) + ")"
}
