/**
 * The object with some of its methods replaced (a store that fails, counts or waits on demand);
 * every other property is the object's own, its methods bound to it.
 */
export function overriding<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(object, property) {
      if (Object.hasOwn(overrides, property)) return overrides[property as keyof T];
      const value: unknown = Reflect.get(object, property);
      return typeof value === 'function' ? value.bind(object) : value;
    },
  });
}
