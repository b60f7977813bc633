package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

func sdkResource(service string) *resource.Resource {
	// OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES still apply (resource.Default).
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return resource.Default()
	}
	return r
}
