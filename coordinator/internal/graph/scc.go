package graph

// condensation is the strongly connected components of a graph, or of the
// subgraph induced by some of its vertices, in the order Tarjan's algorithm
// completes them: every edge leaving a component points to one completed
// before it. For `uses` links that means dependencies come first, so a
// single pass in component order can carry facts from dependencies up to
// their users.
type condensation struct {
	comp  []int32 // vertex → component, -1 for a vertex outside the subgraph
	start []int32 // component c holds nodes[start[c]:start[c+1]]
	nodes []int32 // vertices grouped by component, in no order within one
}

func (c condensation) count() int              { return len(c.start) - 1 }
func (c condensation) members(k int32) []int32 { return c.nodes[c.start[k]:c.start[k+1]] }

// condense runs Tarjan's algorithm over the vertices v with in[v] (all of
// them when in is nil). It keeps its own call stack on the heap: a chain of
// ten thousand dependencies must not cost ten thousand goroutine frames.
func condense(adj csr, in []bool) condensation {
	n := len(adj.off) - 1
	const unvisited = -1
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	c := condensation{comp: make([]int32, n), start: make([]int32, 1, n+1), nodes: make([]int32, 0, n)}
	for v := range index {
		index[v] = unvisited
		c.comp[v] = -1
	}
	type frame struct {
		v   int32
		pos int32 // next edge of v to look at
	}
	var (
		frames  []frame
		stack   []int32
		counter int32
	)
	visit := func(v int32) {
		index[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		onStack[v] = true
		frames = append(frames, frame{v: v, pos: adj.off[v]})
	}
	for s := range int32(n) {
		if index[s] != unvisited || (in != nil && !in[s]) {
			continue
		}
		visit(s)
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			v := f.v
			if f.pos < adj.off[v+1] {
				w := adj.dst[f.pos]
				f.pos++
				switch {
				case in != nil && !in[w]:
				case index[w] == unvisited:
					visit(w) // f is stale from here on
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			frames = frames[:len(frames)-1]
			if len(frames) > 0 {
				p := frames[len(frames)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			k := int32(c.count())
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c.comp[w] = k
				c.nodes = append(c.nodes, w)
				if w == v {
					break
				}
			}
			c.start = append(c.start, int32(len(c.nodes)))
		}
	}
	return c
}

// reach answers, for up to 64 seed vertices at once, which components reach
// which seeds through edges of the condensed (sub)graph: bit k of the result
// for component c is set when c reaches seeds[k] (or holds it). One pass in
// component order suffices because a component's dependencies are final
// before it is looked at.
func (c condensation) reach(adj csr, seeds []int32, bits []uint64) []uint64 {
	if len(seeds) > 64 {
		panic("graph: reach takes at most 64 seeds")
	}
	bits = bits[:c.count()]
	clear(bits)
	for k, s := range seeds {
		bits[c.comp[s]] |= 1 << k
	}
	for k := range int32(c.count()) {
		b := bits[k]
		for _, v := range c.members(k) {
			for _, w := range adj.of(v) {
				if d := c.comp[w]; d >= 0 && d != k {
					b |= bits[d]
				}
			}
		}
		bits[k] = b
	}
	return bits
}
