package schedule

// mergeSorted merges lists that are each sorted by cmp into one sorted list.
// Ties go to the earlier list, so list order (target declaration order) is kept.
// It moves each element once, where a sort of the concatenation would move large
// structs many times.
func mergeSorted[T any](lists [][]T, cmp func(a, b T) int) []T {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	out := make([]T, 0, total)
	heads := make([]int, len(lists))
	for len(out) < total {
		best := -1
		for i, l := range lists {
			if heads[i] < len(l) && (best < 0 || cmp(l[heads[i]], lists[best][heads[best]]) < 0) {
				best = i
			}
		}
		out = append(out, lists[best][heads[best]])
		heads[best]++
	}
	return out
}
