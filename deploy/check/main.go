// Command check validates the Kubernetes manifests in deploy/ against the
// Kubernetes API types (k8s.io/api): every document must decode strictly
// (no unknown or mistyped field) into the type its kind names, and the
// objects must fit together: selectors match the pod labels, the ports the
// probes and the Service name exist, the Secret the pod mounts is there
// with the key it reads. With -cli, the container's args are also parsed
// by that rlm-sandbox binary (`serve --help` after them fails on a bad
// flag).
//
// It is a module of its own so that the main module does not depend on
// the Kubernetes libraries; `make deploy-check` runs it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type objects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	secrets     []*corev1.Secret
}

func main() {
	cli := flag.String("cli", "", "an rlm-sandbox binary to parse the containers' args with")
	flag.Parse()
	var objs objects
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, path := range flag.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			fail("%v", err)
			continue
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if err := decode(&objs, []byte(doc)); err != nil {
				fail("%s, document %d: %v", path, i+1, err)
			}
		}
	}
	for _, p := range crossCheck(&objs, *cli) {
		fail("%s", p)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "deploy-check:", p)
		}
		os.Exit(1)
	}
	fmt.Printf("deploy-check: %d deployment(s), %d service(s), %d secret(s): valid\n",
		len(objs.deployments), len(objs.services), len(objs.secrets))
}

func decode(objs *objects, doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	switch {
	case meta.APIVersion == "" && meta.Kind == "":
		return nil // only comments
	case meta.APIVersion == "apps/v1" && meta.Kind == "Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			return err
		}
		objs.deployments = append(objs.deployments, &d)
	case meta.APIVersion == "v1" && meta.Kind == "Service":
		var s corev1.Service
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return err
		}
		objs.services = append(objs.services, &s)
	case meta.APIVersion == "v1" && meta.Kind == "Secret":
		var s corev1.Secret
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return err
		}
		objs.secrets = append(objs.secrets, &s)
	default:
		return fmt.Errorf("%s %s: a kind this check does not know", meta.APIVersion, meta.Kind)
	}
	return nil
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func crossCheck(objs *objects, cli string) []string {
	var p []string
	for _, d := range objs.deployments {
		name := "deployment " + d.Name
		if d.Spec.Selector == nil || !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			p = append(p, name+": the selector does not match the pod template's labels")
		}
		pod := d.Spec.Template.Spec
		for _, c := range pod.Containers {
			ports := map[string]bool{}
			for _, cp := range c.Ports {
				ports[cp.Name] = true
			}
			for what, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				switch {
				case probe == nil:
					p = append(p, fmt.Sprintf("%s: container %s has no %s probe", name, c.Name, what))
				case probe.HTTPGet == nil:
					p = append(p, fmt.Sprintf("%s: the %s probe is not an HTTP GET", name, what))
				case probe.HTTPGet.Port.StrVal != "" && !ports[probe.HTTPGet.Port.StrVal]:
					p = append(p, fmt.Sprintf("%s: the %s probe's port %q is not a container port", name, what, probe.HTTPGet.Port.StrVal))
				}
			}
			if c.Resources.Requests.Memory().IsZero() {
				p = append(p, fmt.Sprintf("%s: container %s requests no memory", name, c.Name))
			}
			if cli != "" {
				args := append(append([]string{}, c.Args...), "--help")
				var stderr bytes.Buffer
				cmd := exec.Command(cli, args...)
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					p = append(p, fmt.Sprintf("%s: %s %s: %v: %s", name, cli, strings.Join(c.Args, " "), err, stderr.String()))
				}
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret == nil {
				continue
			}
			var found *corev1.Secret
			for _, s := range objs.secrets {
				if s.Name == v.Secret.SecretName {
					found = s
				}
			}
			if found == nil {
				p = append(p, fmt.Sprintf("%s: volume %s: no secret %s", name, v.Name, v.Secret.SecretName))
				continue
			}
			for _, item := range v.Secret.Items {
				_, inData := found.Data[item.Key]
				_, inString := found.StringData[item.Key]
				if !inData && !inString {
					p = append(p, fmt.Sprintf("%s: secret %s has no key %s", name, found.Name, item.Key))
				}
			}
		}
	}
	for _, s := range objs.services {
		var target *appsv1.Deployment
		for _, d := range objs.deployments {
			if matches(s.Spec.Selector, d.Spec.Template.Labels) {
				target = d
			}
		}
		if target == nil {
			p = append(p, "service "+s.Name+": its selector matches no deployment's pods")
			continue
		}
		ports := map[string]bool{}
		for _, c := range target.Spec.Template.Spec.Containers {
			for _, cp := range c.Ports {
				ports[cp.Name] = true
			}
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.StrVal != "" && !ports[sp.TargetPort.StrVal] {
				p = append(p, fmt.Sprintf("service %s: targetPort %q is not a port of %s's containers", s.Name, sp.TargetPort.StrVal, target.Name))
			}
		}
	}
	return p
}
