package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestIncidentLifecycle(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		s := open(t)
		ctx := context.Background()
		t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

		id, err := s.OpenIncident(ctx, Incident{Target: "orders-db", Kind: "postgres", Reason: "connection refused", StartedAt: t0, Explains: []string{"api-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.OpenIncident(ctx, Incident{Target: "orders-db", Kind: "postgres", StartedAt: t0.Add(time.Minute)}); !errors.Is(err, ErrExists) {
			t.Fatalf("second open incident on the same target: got %v; want ErrExists", err)
		}
		if err := s.UpdateIncident(ctx, id, "timeout", []string{"api-1", "web-1"}); err != nil {
			t.Fatal(err)
		}
		other, err := s.OpenIncident(ctx, Incident{Target: "cache", Kind: "redis", Reason: "EOF", StartedAt: t0.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}

		open1, err := s.OpenIncidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(open1) != 2 || open1[0].ID != id || open1[1].ID != other {
			t.Fatalf("open incidents %+v; want orders-db then cache", open1)
		}
		got := open1[0]
		if got.Target != "orders-db" || got.Kind != "postgres" || got.Reason != "timeout" || !got.StartedAt.Equal(t0) || !got.Open() ||
			!slices.Equal(got.Explains, []string{"api-1", "web-1"}) {
			t.Fatalf("got %+v", got)
		}
		if open1[1].Explains == nil {
			t.Fatal("explains is nil; want an empty list")
		}

		if err := s.EndIncident(ctx, id, t0.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.EndIncident(ctx, id, t0.Add(6*time.Minute)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ending twice: got %v; want ErrNotFound", err)
		}
		if err := s.UpdateIncident(ctx, id, "x", nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("updating an ended incident: got %v; want ErrNotFound", err)
		}
		if err := s.EndIncident(ctx, 999, t0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ending an unknown incident: got %v; want ErrNotFound", err)
		}
		// An end before the start is clamped to the start.
		if err := s.EndIncident(ctx, other, t0); err != nil {
			t.Fatal(err)
		}
		// Once ended, the target may have a new incident.
		again, err := s.OpenIncident(ctx, Incident{Target: "orders-db", Kind: "postgres", Reason: "refused", StartedAt: t0.Add(10 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}

		// The history survives reopening the store.
		s.Close()
		s = open(t)
		hist, err := s.Incidents(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != 3 || hist[0].ID != again || hist[1].ID != other || hist[2].ID != id {
			t.Fatalf("history %+v; want newest first", hist)
		}
		if !hist[0].Open() || !hist[2].EndedAt.Equal(t0.Add(5*time.Minute)) || !hist[1].EndedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("history %+v", hist)
		}
		if hist, _ := s.Incidents(ctx, 1); len(hist) != 1 || hist[0].ID != again {
			t.Fatalf("limit 1: %+v", hist)
		}
		open2, err := s.OpenIncidents(ctx)
		if err != nil || len(open2) != 1 || open2[0].ID != again {
			t.Fatalf("open incidents %+v, %v; want only the new one", open2, err)
		}
	})
}

func TestIncidentRefusals(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if _, err := s.OpenIncident(ctx, Incident{Kind: "redis", StartedAt: time.Now()}); err == nil {
			t.Error("an incident without a target was recorded")
		}
		if _, err := s.OpenIncident(ctx, Incident{Target: "cache"}); err == nil {
			t.Error("an incident without a start was recorded")
		}
		id, err := s.OpenIncident(ctx, Incident{Target: "cache", StartedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EndIncident(ctx, id, time.Time{}); err == nil {
			t.Error("an incident was ended at the zero time")
		}
		if in, _ := s.OpenIncidents(ctx); len(in) != 1 {
			t.Errorf("open incidents %+v; want the one still open", in)
		}
	})
}
