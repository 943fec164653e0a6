package ownership

// tree is an ordered set of keys, each with a weight, that answers in
// O(log n) the two questions the incremental budget asks (see incBudget):
// the shortest prefix whose weights sum to at least a need, and the first
// key after another whose weight is at most a bound. It is a treap: a
// binary search tree by key, a heap by random priority.
type tree[K any] struct {
	root *node[K]
	cmp  func(a, b K) int
	seed uint64
	len  int
}

type node[K any] struct {
	key         K
	weight      int64
	e           *incEntry
	prio        uint64
	left, right *node[K]
	// sum and min are of weight over the subtree.
	sum, min int64
}

func newTree[K any](cmp func(a, b K) int) *tree[K] {
	return &tree[K]{cmp: cmp, seed: 0x9e3779b97f4a7c15}
}

func (t *tree[K]) prio() uint64 {
	// splitmix64: priorities need only be independent of the keys.
	t.seed += 0x9e3779b97f4a7c15
	z := t.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (n *node[K]) fix() {
	n.sum, n.min = n.weight, n.weight
	if n.left != nil {
		n.sum += n.left.sum
		n.min = min(n.min, n.left.min)
	}
	if n.right != nil {
		n.sum += n.right.sum
		n.min = min(n.min, n.right.min)
	}
}

// split splits n into the keys before k and those at or after it.
func (t *tree[K]) split(n *node[K], k K) (l, r *node[K]) {
	if n == nil {
		return nil, nil
	}
	if t.cmp(n.key, k) < 0 {
		n.right, r = t.split(n.right, k)
		n.fix()
		return n, r
	}
	l, n.left = t.split(n.left, k)
	n.fix()
	return l, n
}

// merge joins l and r, every key of l before every key of r.
func merge[K any](l, r *node[K]) *node[K] {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = merge(l.right, r)
		l.fix()
		return l
	default:
		r.left = merge(l, r.left)
		r.fix()
		return r
	}
}

// insert adds k, which the tree must not hold, with weight w and entry e.
func (t *tree[K]) insert(k K, w int64, e *incEntry) {
	n := &node[K]{key: k, weight: w, e: e, prio: t.prio()}
	n.fix()
	l, r := t.split(t.root, k)
	t.root = merge(merge(l, n), r)
	t.len++
}

// delete removes k, which the tree must hold.
func (t *tree[K]) delete(k K) {
	t.root = t.del(t.root, k)
	t.len--
}

func (t *tree[K]) del(n *node[K], k K) *node[K] {
	if n == nil {
		panic("ownership: tree: deleting a key it does not hold")
	}
	switch c := t.cmp(k, n.key); {
	case c < 0:
		n.left = t.del(n.left, k)
	case c > 0:
		n.right = t.del(n.right, k)
	default:
		return merge(n.left, n.right)
	}
	n.fix()
	return n
}

// cut returns the last key of the shortest prefix whose weights sum to at
// least need (need > 0), and that sum; ok is false if every key together
// weighs less.
func (t *tree[K]) cut(need int64) (k K, sum int64, ok bool) {
	n := t.root
	if n == nil || n.sum < need {
		return k, 0, false
	}
	for {
		var ls int64
		if n.left != nil {
			ls = n.left.sum
		}
		switch {
		case ls >= need:
			n = n.left
		case ls+n.weight >= need:
			return n.key, sum + ls + n.weight, true
		default:
			sum += ls + n.weight
			need -= ls + n.weight
			n = n.right
		}
	}
}

// firstFit returns the first node after k (from the first key if !after)
// whose weight is at most bound.
func (t *tree[K]) firstFit(k K, after bool, bound int64) *node[K] {
	return t.fit(t.root, k, after, bound)
}

func (t *tree[K]) fit(n *node[K], k K, after bool, bound int64) *node[K] {
	if n == nil || n.min > bound {
		return nil
	}
	if after && t.cmp(n.key, k) <= 0 {
		// Everything left of n, and n, is at or before k.
		return t.fit(n.right, k, after, bound)
	}
	if f := t.fit(n.left, k, after, bound); f != nil {
		return f
	}
	if n.weight <= bound {
		return n
	}
	return t.fit(n.right, k, after, bound)
}

// between calls fn with every node whose key is after lo (from the first
// if !hasLo) and at or before hi (to the last if !hasHi).
func (t *tree[K]) between(lo K, hasLo bool, hi K, hasHi bool, fn func(*node[K])) {
	var walk func(n *node[K])
	walk = func(n *node[K]) {
		if n == nil {
			return
		}
		afterLo := !hasLo || t.cmp(n.key, lo) > 0
		beforeHi := !hasHi || t.cmp(n.key, hi) <= 0
		if afterLo {
			walk(n.left)
		}
		if afterLo && beforeHi {
			fn(n)
		}
		if beforeHi {
			walk(n.right)
		}
	}
	walk(t.root)
}
