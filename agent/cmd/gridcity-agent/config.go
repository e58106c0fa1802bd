package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"

	"github.com/gridcity/gridcity/agent/internal/flatyaml"
)

// Config is the agent's configuration: the YAML file given with --config,
// overridden by flags and GRIDCITY_AGENT_* variables.
type Config struct {
	// Name is the server's name in the fleet (default: the host name).
	Name string `yaml:"name"`
	// District groups the server with others (optional).
	District string `yaml:"district"`
	// RunAs is the user approved commands run as.
	RunAs string `yaml:"runAs"`
	// Commands false means this agent never runs a command, whatever is approved.
	Commands bool `yaml:"commands"`
	// Probes false leaves the checks of the resources this server uses to
	// the coordinator instead of running them from here.
	Probes bool `yaml:"probes"`
	// AuthLogs are the SSH authentication logs followed for attacks.
	AuthLogs []string `yaml:"authLogs"`
}

// DefaultConfig is the configuration without a file.
func DefaultConfig() Config {
	name, _ := os.Hostname()
	return Config{Name: name, RunAs: "root", Commands: true, Probes: true, AuthLogs: []string{"/var/log/auth.log", "/var/log/secure"}}
}

// LoadConfig reads a config file over the defaults. Unknown keys are errors,
// so that a typo does not silently leave a setting at its default.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	if err := cfg.decode(b); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// decode sets the settings the YAML in b gives (a key set to nothing or
// null leaves its setting as it was, but for authLogs, which it empties).
func (c *Config) decode(b []byte) error {
	fields, err := flatyaml.Parse(b)
	if err != nil {
		return err
	}
	strs := map[string]*string{"name": &c.Name, "district": &c.District, "runAs": &c.RunAs}
	bools := map[string]*bool{"commands": &c.Commands, "probes": &c.Probes}
	for _, f := range fields {
		switch s, b := strs[f.Key], bools[f.Key]; {
		case s != nil:
			v, set, err := f.Value.String()
			if err != nil {
				return fmt.Errorf("%s: %w", f.Key, err)
			}
			if set {
				*s = v
			}
		case b != nil:
			v, set, err := f.Value.Bool()
			if err != nil {
				return fmt.Errorf("%s: %w", f.Key, err)
			}
			if set {
				*b = v
			}
		case f.Key == "authLogs":
			if c.AuthLogs, err = f.Value.Strings(); err != nil {
				return fmt.Errorf("%s: %w", f.Key, err)
			}
		default:
			return fmt.Errorf("line %d: unknown setting %q (the settings are name, district, runAs, commands, probes and authLogs)", f.Value.Line, f.Key)
		}
	}
	return nil
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("no server name: the host has no name; set name: in the config or --name")
	}
	if c.Commands {
		if c.RunAs == "" {
			return errors.New("runAs is empty: name the user approved commands run as, or set commands: false")
		}
		if _, err := user.Lookup(c.RunAs); err != nil {
			return fmt.Errorf("runAs %q: %w (create the user, or set commands: false)", c.RunAs, err)
		}
	}
	return nil
}
