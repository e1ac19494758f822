// Package pull holds the words of a pull's outcome that the pull engine
// reports and the agent's planner decides from: an image's state in the
// engine (Status, State), a finished pull (Result, Class), the image
// filesystem's level (DiskUsage) and what the runtime holds (PresentImage).
// It is plain data, with no runtime, clock or API client behind it, so the
// planner can read the engine's reports without importing the engine (and
// through it CRI and gRPC). Package pullengine aliases its types.
package pull
