package modules

import "sync"

// Services hold what a module builds once per manager for the modules that
// require it. Keys are unexported types of the providing package, so that
// only that package's typed accessors read or write an entry: the providing
// package owns the type, this package only carries it.
type Services struct {
	mu sync.Mutex
	m  map[any]any
}

// NewServices returns an empty set of services.
func NewServices() *Services { return &Services{m: map[any]any{}} }

// Provide stores v under key, replacing any earlier value.
func (s *Services) Provide(key, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = v
}

// Lookup returns the value stored under key.
func (s *Services) Lookup(key any) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}
