package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// CapacityProvider is the Options.Capacity value that takes the provider's declared capacity.
const CapacityProvider = "provider"

// maxCapacity bounds Options.Capacity as the capacity_declared option bounds it.
const maxCapacity = 1024

// capacitySettings are the formation options Options.Capacity stands for with n slots.
func capacitySettings(n int) []string {
	return []string{"capacity_aware=true", "capacity_declared=" + strconv.Itoa(n)}
}

// applyCapacity checks Options.Capacity and, for a number, adds its formation options (once:
// Normalize may run more than once). "provider" is checked against the selected cases with a
// stand-in of one slot; Run adds the provider's declared value (resolveCapacity).
func (o *Options) applyCapacity() error {
	if o.Capacity == "" || o.capacityApplied {
		return nil
	}
	for _, kv := range o.FormationOptions {
		name, _, _ := strings.Cut(kv, "=")
		if name == "capacity_aware" || name == "capacity_declared" {
			return optionErrRelated("Capacity", []string{"FormationOptions"}, "and FormationOptions %s both set the capacity: give one", kv)
		}
	}
	n := 1
	if o.Capacity != CapacityProvider {
		var err error
		n, err = strconv.Atoi(o.Capacity)
		if err != nil || n < 1 || n > maxCapacity {
			return optionErr("Capacity", "%q is neither a number of admission slots in 1..%d nor %q", o.Capacity, maxCapacity, CapacityProvider)
		}
	}
	probe := *o
	probe.FormationOptions = append(slices.Clone(o.FormationOptions), capacitySettings(n)...)
	if err := probe.checkFormationOptions(); err != nil {
		var oe *OptionError
		if errors.As(err, &oe) {
			return optionErr("Capacity", "%s cannot be applied: %s", o.Capacity, oe.Reason)
		}
		return optionErr("Capacity", "%s cannot be applied: %v", o.Capacity, err)
	}
	if o.Capacity != CapacityProvider {
		o.FormationOptions, o.capacityApplied = probe.FormationOptions, true
	}
	return nil
}

// resolveCapacity reads, for Options.Capacity "provider", the provider's declared parallel
// capacity for Model — GET {base}/models/{model}, its max_parallel_requests (provider.Client's
// ParallelCapacity, what the runtime's capacity-aware admission reads) — and adds it as
// capacity_declared, so the recorded options hold the number the admission rule re-derives from.
// The embedded reference provider is asked the same way, over HTTP, on a server started for the
// question alone. Nothing is written. A provider that declares no positive integer is
// ErrBadOptions naming it.
func (o *Options) resolveCapacity(ctx context.Context) error {
	if o.Capacity != CapacityProvider || o.capacityApplied {
		return nil
	}
	base, key := o.BaseURL, o.APIKey
	if base == "" {
		ref, err := reference.Start(ctx, reference.Config{SessionHeader: o.SessionHeader})
		if err != nil {
			return fmt.Errorf("start the reference provider to read its capacity: %w", err)
		}
		defer ref.Close()
		base, key = ref.BaseURL(), ""
	}
	c, err := provider.NewClient(provider.ClientConfig{BaseURL: base, APIKey: key, SessionHeader: o.SessionHeader, Timeout: o.RequestTimeout})
	if err != nil {
		return optionErr("Capacity", "provider: %v", err)
	}
	n, err := c.ParallelCapacity(ctx, o.Model)
	if err != nil {
		return optionErr("Capacity", "provider: the provider declares no usable capacity for model %s (%v); give --capacity N", o.Model, err)
	}
	if n > maxCapacity {
		return optionErr("Capacity", "provider: the provider declares %d parallel requests for %s, above %d", n, o.Model, maxCapacity)
	}
	o.FormationOptions = append(o.FormationOptions, capacitySettings(n)...)
	o.capacityApplied = true
	return o.checkFormationOptions()
}
