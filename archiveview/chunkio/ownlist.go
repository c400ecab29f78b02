package chunkio

import "container/list"

// ownIndex lists an LRU's entries by the client their buffer is charged
// to, each client's in the LRU's own order (oldest first), so that a
// client short of its share gives up its own oldest entry after looking
// at its own entries only, not at the whole cache (evictOwn). The owner
// keeps it beside the LRU under the same lock: add on Add, touch on a Get
// hit, remove from the LRU's eviction callback. Its bookkeeping is one
// list element and map slot per entry charged to a client, bounded as the
// LRU's entries are.
type ownIndex struct {
	byClient map[*clientUse]*list.List // of ownEntry
	at       map[cacheKey]*list.Element
	visited  int64 // entries oldestFree looked at (tests: the cost of an eviction)
}

type ownEntry struct {
	k cacheKey
	b *Buf
}

func newOwnIndex() *ownIndex {
	return &ownIndex{byClient: map[*clientUse]*list.List{}, at: map[cacheKey]*list.Element{}}
}

// add records k (just added to the LRU, its newest entry) under b's client.
func (o *ownIndex) add(k cacheKey, b *Buf) {
	if b.cl == nil {
		return
	}
	if _, ok := o.at[k]; ok {
		o.remove(k)
	}
	l := o.byClient[b.cl]
	if l == nil {
		l = list.New()
		o.byClient[b.cl] = l
	}
	o.at[k] = l.PushBack(ownEntry{k: k, b: b})
}

// touch makes k its client's newest entry (the LRU's Get did the same).
func (o *ownIndex) touch(k cacheKey) {
	if e, ok := o.at[k]; ok {
		o.byClient[e.Value.(ownEntry).b.cl].MoveToBack(e)
	}
}

// remove forgets k (the LRU dropped it).
func (o *ownIndex) remove(k cacheKey) {
	e, ok := o.at[k]
	if !ok {
		return
	}
	delete(o.at, k)
	cl := e.Value.(ownEntry).b.cl
	l := o.byClient[cl]
	l.Remove(e)
	if l.Len() == 0 {
		delete(o.byClient, cl)
	}
}

// oldestFree returns cl's oldest entry that no reader holds (the LRU's
// reference only).
func (o *ownIndex) oldestFree(cl *clientUse) (cacheKey, bool) {
	l := o.byClient[cl]
	if l == nil {
		return cacheKey{}, false
	}
	for e := l.Front(); e != nil; e = e.Next() {
		o.visited++
		if en := e.Value.(ownEntry); en.b.refs.Load() == 1 {
			return en.k, true
		}
	}
	return cacheKey{}, false
}
