// "react" of the import map: React's CommonJS build as an ES module with its named exports.
// The list is React 18.3.1's (a test compares it with the module's keys in the browser).
import React from "react";

export default React;
export const {
  Children, Component, Fragment, Profiler, PureComponent, StrictMode, Suspense,
  __SECRET_INTERNALS_DO_NOT_USE_OR_YOU_WILL_BE_FIRED, act, cloneElement, createContext,
  createElement, createFactory, createRef, forwardRef, isValidElement, lazy, memo,
  startTransition, unstable_act, useCallback, useContext, useDebugValue, useDeferredValue,
  useEffect, useId, useImperativeHandle, useInsertionEffect, useLayoutEffect, useMemo,
  useReducer, useRef, useState, useSyncExternalStore, useTransition, version,
} = React;
