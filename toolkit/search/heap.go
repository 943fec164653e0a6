package search

// siftUp and siftDown keep h a min-heap by minLess (worst on top).
func siftUp(h []cand, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !minLess(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func siftDown(h []cand, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && minLess(h[r], h[l]) {
			m = r
		}
		if !minLess(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
