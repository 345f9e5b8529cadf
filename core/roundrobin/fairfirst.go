package roundrobin

// FairFirst shares a claim's budget with its fair queues first, the way the MySQL and SQLite
// claims do: for each queue i whose fair[i] is set, in request order, pick(i, n) picks up to n
// rows, n being the queue's limit cut to what is left of the budget; the queue's limit then
// drops to 0, so the plain pick that follows leaves it out. It returns the limits (a copy:
// limits is not changed), the budget left and every fair queue's rows in order.
func FairFirst[T any](fair []bool, limits []int, budget int, pick func(i, n int) ([]T, error)) ([]int, int, []T, error) {
	left := make([]int, len(limits))
	copy(left, limits)
	var rows []T
	for i, on := range fair {
		if !on {
			continue
		}
		got, err := pick(i, min(left[i], budget-len(rows)))
		if err != nil {
			return limits, budget, nil, err
		}
		rows = append(rows, got...)
		left[i] = 0
	}
	return left, budget - len(rows), rows, nil
}
