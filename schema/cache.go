package schema

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// DefaultCacheSize is how many compiled schemas a [Cache] made with size 0
// keeps.
const DefaultCacheSize = 64

// Cache compiles each distinct schema once: compiling (the meta-schema
// check included) costs a few hundred microseconds, a lookup a hash of the
// document. It is keyed by content, never by path: a document read
// through Source.Loader is read again on every call, and so is every
// document it referred to, so a schema file someone rewrites (a model in
// its work dir) is compiled anew. It keeps the most recently used schemas,
// at most its size, and is safe for concurrent use.
type Cache struct {
	size    int
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element
	recent  *list.List // of *cacheEntry, most recently used first
}

// cacheEntry is a compiled schema and the documents its compilation read
// through the loader, with the digest of what it read.
type cacheEntry struct {
	key  [sha256.Size]byte
	sch  *Schema
	deps []loaded
}

// loaded is one document read through a Source's Loader.
type loaded struct {
	url    string
	digest [sha256.Size]byte
}

// NewCache returns a Cache keeping at most size compiled schemas
// (size <= 0 = DefaultCacheSize).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{size: size, entries: map[[sha256.Size]byte]*list.Element{}, recent: list.New()}
}

// Compile is [CompileSource] for src, served from the cache when the same
// document at the same URL was compiled before and every document it
// referred to still reads the same through src.Loader. Failures are not
// kept: a schema that does not compile is compiled (and reported) again.
func (c *Cache) Compile(src Source) (*Schema, error) {
	if src.Raw == nil && src.Loader != nil {
		u := src.URL
		if u == "" {
			u = schemaURL
		}
		raw, err := src.Loader(u)
		if err != nil {
			// CompileSource words the failure to read the document.
			return CompileSource(src)
		}
		// Compiled from the bytes hashed, not from a second read.
		src.Raw = raw
	}
	key := sourceKey(src)
	if sch := c.lookup(key, src.Loader); sch != nil {
		return sch, nil
	}
	var deps []loaded
	if load := src.Loader; load != nil {
		src.Loader = func(url string) ([]byte, error) {
			b, err := load(url)
			if err == nil {
				deps = append(deps, loaded{url: url, digest: sha256.Sum256(b)})
			}
			return b, err
		}
	}
	sch, err := CompileSource(src)
	if err != nil {
		return nil, err
	}
	c.store(&cacheEntry{key: key, sch: sch, deps: deps})
	return sch, nil
}

// lookup returns the schema kept under key if the documents it was
// compiled with still read the same through load, or nil.
func (c *Cache) lookup(key [sha256.Size]byte, load func(string) ([]byte, error)) *Schema {
	c.mu.Lock()
	el, ok := c.entries[key]
	var e *cacheEntry
	if ok {
		e = el.Value.(*cacheEntry)
		c.recent.MoveToFront(el)
	}
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	for _, d := range e.deps {
		b, err := load(d.url)
		if err != nil || sha256.Sum256(b) != d.digest {
			return nil
		}
	}
	return e.sch
}

// store keeps e, dropping the least recently used schema beyond the size.
func (c *Cache) store(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.recent.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.recent.PushFront(e)
	for c.recent.Len() > c.size {
		last := c.recent.Back()
		c.recent.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// sourceKey digests what decides the compilation of src besides the
// documents its loader reads: the document, its URL and how it is
// compiled.
func sourceKey(src Source) [sha256.Size]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(src.URL))
	field(src.Raw)
	flags := []byte{0, 0}
	if src.Builtin {
		flags[0] = 1
	}
	if src.Loader != nil {
		flags[1] = 1
	}
	field(flags)
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
